#!/usr/bin/python3
"""berth's Debian package, built as an operator would build it and installed where nothing else
is:
  1. tools/package.sh builds berth_VERSION_amd64.deb, and lintian reports no error and no
     hardening tag (stack protector, FORTIFY_SOURCE, BIND_NOW: tools/build.sh's flags);
  2. the package holds the programs, the units, the config as a conffile, and depends on the
     DPDK drivers berthd loads at run time, which dh_shlibdeps cannot see; its maintainer scripts
     never start or restart berthd, and stop it only on removal; it holds the Grafana dashboard
     and the alert rules;
  3. installed by apt into a fresh Debian 12 root (debootstrap, minbase) and entered with chroot:
     every program answers --help and --version, `berthctl check` and `berthctl analyze` take
     /etc/berth/berth.yaml, the berth user exists, the route files are there;
  4. `systemd-analyze verify` passes on the units in that root, man pages included, and
     `systemd-analyze security --offline=true` rates berthd.service at most 4.0 and
     berth-hugepages.service at most 2.0;
  5. an upgrade, with a stand-in for systemd (/run/systemd/system and a systemctl that records
     its calls), reloads systemd's units and starts nothing;
  6. without bird2, berth-announcer.service's condition keeps it from starting, rather than
     its SupplementaryGroups=bird failing it;
  7. PID 1 here is not systemd, so berthd.service is run by hand as systemd would run it: its
     ExecStartPre, then its ExecStart under the unit's environment, capability bounding set,
     limits and runtime directory, with a notify socket the test reads; READY=1 comes, berthd
     holds exactly the unit's capabilities and forwards on af_packet with a tap exception
     interface, ExecReload reloads it, SIGTERM brings STOPPING=1 and exit 0;
  8. ExecStartPre refuses a bad config before berthd starts, naming its line;
  9. with a capability taken from the set (CAP_NET_ADMIN), berthd refuses to start and names
     the port it could not start;
 10. berth-hugepages.service, run by hand, reserves its pages and gives back what it reserved
     when it stops.
The unit's LimitMEMLOCK and LimitNOFILE are applied as far as this machine lets root raise a
hard limit.

Usage: package_test.py SOURCE_ROOT
"""
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE_ROOT = os.path.abspath(sys.argv.pop(1))
TAG = "%d" % (os.getpid() % 100000)
NAMESPACE = "berthpkg" + TAG
PORT = "pk" + TAG
TAP = "pkt" + TAG
PREFIX = "berth-package-" + TAG
CAPABILITY_BITS = {"CAP_NET_BIND_SERVICE": 10, "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13,
                   "CAP_IPC_LOCK": 14, "CAP_SYS_RAWIO": 17, "CAP_SYS_ADMIN": 21}

CONFIG = """dataplane:
  ports:
    - name: p0
      device: net_af_packet0
      ipv4: 198.18.0.10
      gateway_mac: "02:00:00:00:00:fe"
      exception: { kind: tap, name: %s }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    health: { type: none }
    backends:
      - { name: web-1, address: 198.18.1.2 }
      - { name: web-2, address: 198.18.1.3 }
""" % TAP
EAL_OPTIONS = ("--no-huge -m 256 --no-pci --file-prefix %s --lcores 0@0,1@1 --log-level "
               "lib.eal:error --vdev net_af_packet0,iface=%s" % (PREFIX, PORT))


def run(*argv, check=True, timeout=600, **kwargs):
    result = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(argv), result.returncode,
                                                         result.stdout[-4000:],
                                                         result.stderr[-4000:]))
    return result


def unit_settings(path):
    """A unit file's [Service] (and other) settings: name -> list of values, in order, with
    continued lines joined as systemd joins them."""
    settings = {}
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        name, _, value = line.partition("=")
        settings.setdefault(name.strip(), []).append(value.strip())
    return settings


def expand(command, environment):
    """systemd's expansion of an Exec line: "$NAME" alone is split into words, "${NAME}" is
    replaced in place, as one word."""
    words = []
    for word in shlex.split(command):
        alone = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if alone:
            words.extend(environment.get(alone.group(1), "").split())
            continue
        words.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                            lambda m: environment.get(m.group(1), ""), word))
    return words


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-package-")
        built = run("bash", "tools/package.sh", cwd=SOURCE_ROOT, timeout=1800)
        cls.package_log = built.stdout + built.stderr
        cls.deb = re.search(r"^package: (\S+)$", built.stdout, re.M).group(1)
        cls.deb = os.path.join(SOURCE_ROOT, cls.deb)
        cls.extracted = os.path.join(cls.directory, "extracted")
        run("dpkg", "-x", cls.deb, cls.extracted)
        cls.fresh = None

    @classmethod
    def tearDownClass(cls):
        if cls.fresh:
            for mount in ("proc", "dev"):
                subprocess.run(["umount", "-l", os.path.join(cls.fresh, mount)],
                               capture_output=True)
        shutil.rmtree(cls.directory, ignore_errors=True)

    @classmethod
    def fresh_root(cls):
        """A minbase Debian 12 root with the package installed by apt, made once."""
        if cls.fresh is None:
            root = os.path.join(cls.directory, "fresh")
            run("debootstrap", "--variant=minbase", "bookworm", root,
                "http://deb.debian.org/debian", timeout=1200)
            shutil.copy("/etc/resolv.conf", os.path.join(root, "etc", "resolv.conf"))
            shutil.copy(cls.deb, os.path.join(root, "tmp"))
            run("mount", "-t", "proc", "proc", os.path.join(root, "proc"))
            cls.fresh = root
            # man-db, so that systemd-analyze verify finds the pages the units name.
            run("chroot", root, "sh", "-c",
                "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                "--no-install-recommends /tmp/%s man-db" % os.path.basename(cls.deb),
                timeout=1200)
        return cls.fresh

    def in_fresh(self, command, check=True):
        return run("chroot", self.fresh_root(), "sh", "-c", command, check=check)

    def test_1_the_package_builds_and_lintian_shows_no_error(self):
        self.assertRegex(os.path.basename(self.deb), r"^berth_[0-9][^_]*_amd64\.deb$")
        self.assertNotRegex(self.package_log, r"(?m)^E: ")
        # package.sh runs lintian -I: the hardening tags are information tags.
        self.assertNotRegex(self.package_log, r"(?m)^[EWI]: berth: hardening-")

    def test_2_it_holds_the_programs_units_and_a_conffile_and_names_the_drivers(self):
        for path in ("usr/sbin/berthd", "usr/bin/berthctl", "usr/bin/berthgen",
                     "usr/sbin/berth-announcer", "lib/systemd/system/berthd.service",
                     "lib/systemd/system/berth-announcer.service", "etc/berth/berth.yaml",
                     "etc/default/berth", "usr/lib/sysusers.d/berth.conf",
                     "usr/lib/tmpfiles.d/berth.conf",
                     "usr/share/bash-completion/completions/berthctl",
                     "usr/share/man/man8/berthd.8.gz", "usr/share/man/man8/berthctl.8.gz",
                     "usr/share/man/man1/berthgen.1.gz", "usr/share/man/man8/berth-announcer.8.gz",
                     "usr/share/man/man5/berth.yaml.5.gz"):
            self.assertTrue(os.path.exists(os.path.join(self.extracted, path)), path)
        # The backends' set-up script docs/quickstart.md has operators copy, executable.
        self.assertTrue(os.access(os.path.join(self.extracted, "usr/share/berth/backend-setup.sh"),
                                  os.X_OK))
        control = os.path.join(self.directory, "control")
        run("dpkg-deb", "-e", self.deb, control)
        self.assertIn("/etc/berth/berth.yaml", open(os.path.join(control, "conffiles")).read())
        # Installing or upgrading never starts, stops or restarts berthd; removing stops it.
        with open(os.path.join(control, "postinst")) as f:
            postinst = f.read()
        self.assertNotRegex(postinst, r"deb-systemd-invoke|systemctl .*(start|restart)")
        self.assertIn("systemctl --system daemon-reload", postinst)
        with open(os.path.join(control, "prerm")) as f:
            self.assertRegex(f.read(), r'"\$1" = remove .*\n\s*deb-systemd-invoke stop '
                                       r'berth-announcer.service berthd.service[^\n]*\n\s*'
                                       r'deb-systemd-invoke stop berth-hugepages.service')
        # The monitoring that ships (docs/monitoring.md).
        for name in ("berth-dashboard.json", "berth-alerts.yaml"):
            self.assertTrue(os.path.exists(os.path.join(
                self.extracted, "usr/share/berth/monitoring", name)), name)
        depends = run("dpkg-deb", "-f", self.deb, "Depends").stdout
        for driver in ("librte-mempool-ring23", "librte-bus-vdev23", "librte-net-af-packet23",
                       "librte-net-memif23", "librte-net-tap23", "librte-net-virtio23"):
            self.assertIn(driver, depends)

    def test_3_in_a_fresh_root_the_programs_run(self):
        for program in ("berthd", "berthctl", "berthgen", "berth-announcer"):
            self.assertIn("--version", self.in_fresh("%s --help" % program).stdout)
            self.assertRegex(self.in_fresh("%s --version" % program).stdout,
                             r"^%s \d+\.\d+\.\d+\n$" % program)
        self.assertRegex(self.in_fresh("berthctl check --config /etc/berth/berth.yaml").stdout,
                         r"^/etc/berth/berth.yaml: valid: \d+ service")
        self.assertIn("min-disruption failover",
                      self.in_fresh("berthctl analyze --config /etc/berth/berth.yaml").stdout)
        self.assertIn("berth", self.in_fresh("id berth").stdout)
        self.assertEqual(self.in_fresh("ls /run/berth-announcer").stdout.split(),
                         ["bird-routes4.conf", "bird-routes6.conf"])

    def test_4_systemd_analyze_verify_passes_on_the_units(self):
        result = self.in_fresh(
            "systemd-analyze verify /lib/systemd/system/berthd.service "
            "/lib/systemd/system/berth-announcer.service "
            "/lib/systemd/system/berth-hugepages.service", check=False)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stderr.strip(), "")
        # systemd-analyze's exposure: berthd.service at most 4.0 (it was 5.6), and
        # berth-hugepages.service, which writes one file in /sys, at most 2.0 (it was 9.5).
        for unit, most in (("berthd.service", 4.0), ("berth-hugepages.service", 2.0)):
            security = self.in_fresh("systemd-analyze security --offline=true --no-pager "
                                     "/lib/systemd/system/%s" % unit)
            exposure = re.search(r"Overall exposure level for %s: ([\d.]+)" % re.escape(unit),
                                 security.stdout)
            self.assertIsNotNone(exposure, security.stdout + security.stderr)
            self.assertLessEqual(float(exposure.group(1)), most, security.stdout)

    def test_5_an_upgrade_reloads_the_units_and_starts_nothing(self):
        # A stand-in for systemd as PID 1: the directory maintainer scripts look for, and a
        # systemctl that records what it is asked.
        calls = "/tmp/systemctl-calls"
        self.in_fresh(
            "mkdir -p /run/systemd/system && mv /usr/bin/systemctl /usr/bin/systemctl.real && "
            "printf '#!/bin/sh\\necho \"$*\" >> %s\\n' > /usr/bin/systemctl && "
            "chmod +x /usr/bin/systemctl" % calls)
        try:
            self.in_fresh("dpkg -i /tmp/%s" % os.path.basename(self.deb))
            recorded = self.in_fresh("cat %s" % calls, check=False).stdout
        finally:
            self.in_fresh("mv /usr/bin/systemctl.real /usr/bin/systemctl && "
                          "rm -rf /run/systemd/system %s" % calls, check=False)
        self.assertIn("--system daemon-reload", recorded)
        self.assertNotRegex(recorded, r"\b(start|restart|try-restart)\b")

    def test_6_without_bird2_the_announcer_is_skipped_not_failed(self):
        self.assertNotEqual(self.in_fresh("getent group bird", check=False).returncode, 0,
                            "the fresh root has no bird2")
        unit = unit_settings(os.path.join(self.fresh_root(),
                                          "lib/systemd/system/berth-announcer.service"))
        self.assertIn("bird", unit["SupplementaryGroups"])
        # systemd checks conditions before it resolves the groups: a condition that does not
        # hold here skips the start.
        conditions = unit.get("ConditionPathExists", [])
        self.assertTrue(conditions, "no condition: the start would fail with 216/GROUP")
        for path in conditions:
            self.assertFalse(os.path.exists(os.path.join(self.fresh_root(), path.lstrip("/"))))


class UnitByHand(unittest.TestCase):
    """berthd.service's commands run as systemd would run them, on the packaged binaries."""

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.mkdtemp(prefix="berth-unit-")
        deb = sorted(f for f in os.listdir(os.path.join(SOURCE_ROOT, "build", "package"))
                     if f.endswith(".deb"))[-1]
        cls.root = os.path.join(cls.directory, "root")
        run("dpkg", "-x", os.path.join(SOURCE_ROOT, "build", "package", deb), cls.root)
        cls.unit = unit_settings(os.path.join(cls.root, "lib/systemd/system/berthd.service"))
        cls.created_group = run("getent", "group", "berth", check=False).returncode != 0
        if cls.created_group:
            run("groupadd", "--system", "berth")
        run("ip", "netns", "add", NAMESPACE)
        run("ip", "-n", NAMESPACE, "link", "set", "lo", "up")
        run("ip", "-n", NAMESPACE, "link", "add", PORT, "type", "veth", "peer", "name", PORT + "p")
        for link in (PORT, PORT + "p"):
            run("ip", "-n", NAMESPACE, "link", "set", link, "up")

    @classmethod
    def tearDownClass(cls):
        run("ip", "netns", "del", NAMESPACE, check=False)
        if cls.created_group:
            run("groupdel", "berth", check=False)
        shutil.rmtree(cls.directory, ignore_errors=True)

    def environment(self, config, notify):
        """The unit's environment as systemd builds it: Environment=, then EnvironmentFile=
        (here the test's /etc/default/berth), then what systemd adds."""
        environment = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        for assignment in self.unit["Environment"]:
            for word in shlex.split(assignment):
                name, _, value = word.partition("=")
                environment[name] = value
        environment["BERTH_CONFIG"] = config
        environment["BERTHD_EAL_OPTIONS"] = EAL_OPTIONS
        runtime = os.path.join(self.directory, "run-berth")
        state = os.path.join(self.directory, "var-lib-berth")
        for path in (runtime, state):
            shutil.rmtree(path, ignore_errors=True)
            os.makedirs(path, mode=0o755)
        environment["RUNTIME_DIRECTORY"] = runtime
        environment["STATE_DIRECTORY"] = state
        environment["NOTIFY_SOCKET"] = notify
        environment["WATCHDOG_USEC"] = str(
            int(self.unit["WatchdogSec"][0].rstrip("s")) * 1_000_000)
        return environment

    def packaged(self, words):
        """An Exec line's program from the package, not from this machine's /usr."""
        return [os.path.join(self.root, words[0].lstrip("/"))] + words[1:]

    def capabilities(self, without=()):
        names = [c for c in self.unit["CapabilityBoundingSet"][0].split() if c not in without]
        return names, ",".join("+" + c[len("CAP_"):].lower() for c in names)

    def start(self, without=()):
        config = os.path.join(self.directory, "berth.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        notify = os.path.join(self.directory, "notify")
        if os.path.exists(notify):
            os.unlink(notify)
        self.notifications = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notifications.bind(notify)
        self.addCleanup(self.notifications.close)
        environment = self.environment(config, notify)
        self.environment_used = environment
        for pre in self.unit["ExecStartPre"]:
            run(*self.packaged(expand(pre, environment)), env=environment)
        names, caps = self.capabilities(without)
        command = ["ip", "netns", "exec", NAMESPACE, "setpriv", "--bounding-set", "-all," + caps,
                   "--inh-caps", "-all", "--groups", ",".join(self.unit["SupplementaryGroups"]),
                   "--no-new-privs"]
        command += self.packaged(expand(self.unit["ExecStart"][0], environment))
        memlock = resource.RLIM_INFINITY if self.unit["LimitMEMLOCK"][0] == "infinity" else int(
            self.unit["LimitMEMLOCK"][0])
        files = int(self.unit["LimitNOFILE"][0])

        def limits():
            # As the unit sets them, where this machine lets even root raise a hard limit;
            # otherwise as far as the hard limit goes (containers often hold it down).
            for limit, wanted in ((resource.RLIMIT_MEMLOCK, memlock),
                                  (resource.RLIMIT_NOFILE, files)):
                try:
                    resource.setrlimit(limit, (wanted, wanted))
                except (ValueError, OSError):
                    hard = resource.getrlimit(limit)[1]
                    resource.setrlimit(limit, (hard, hard))

        self.log = open(os.path.join(self.directory, "berthd.log"), "w+")
        self.addCleanup(self.log.close)
        self.process = subprocess.Popen(command, env=environment, stdout=self.log,
                                        stderr=subprocess.STDOUT, preexec_fn=limits)
        self.addCleanup(self.stop_if_running)
        return names

    def stop_if_running(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def receive(self, key, timeout):
        self.notifications.settimeout(0.2)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = self.notifications.recv(4096).decode()
            except socket.timeout:
                if self.process.poll() is not None:
                    return None
                continue
            if any(line.startswith(key + "=") for line in message.splitlines()):
                return message
        return None

    def berthd_pid(self):
        """berthd's own pid: setpriv and ip netns exec replace themselves with it."""
        return self.process.pid

    def test_1_the_unit_starts_berthd_with_exactly_its_capabilities(self):
        names = self.start()
        self.assertIsNotNone(self.receive("READY", 60), self.log_text())
        with open("/proc/%d/status" % self.berthd_pid()) as f:
            status = f.read()
        expected = sum(1 << CAPABILITY_BITS[name] for name in names)
        for field in ("CapEff", "CapPrm", "CapBnd"):
            value = int(re.search(r"^%s:\s+([0-9a-f]+)$" % field, status, re.M).group(1), 16)
            self.assertEqual(value, expected, "%s %x, the unit's %s" % (field, value, names))
        runtime = self.environment_used["RUNTIME_DIRECTORY"]
        self.assertEqual(os.stat(os.path.join(runtime, "berth.sock")).st_mode & 0o777, 0o600)
        read_only = os.stat(os.path.join(runtime, "berth-ro.sock"))
        self.assertEqual(read_only.st_mode & 0o777, 0o660)
        self.assertEqual(read_only.st_gid, int(run("getent", "group", "berth").stdout.split(":")[2]))
        # The exception path's tap is up in berthd's namespace.
        self.assertIn(TAP, run("ip", "-n", NAMESPACE, "link", "show", TAP).stdout)
        # ExecReload, with MAINPID as systemd sets it.
        reload_environment = dict(self.environment_used, MAINPID=str(self.berthd_pid()))
        run(*expand(self.unit["ExecReload"][0], reload_environment), env=reload_environment)
        deadline = time.monotonic() + 30
        while "applied" not in self.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertRegex(self.log_text(), r"reload of .* applied: 1 service\(s\), 2 backend",
                         self.log_text())
        self.process.send_signal(signal.SIGTERM)
        self.assertIsNotNone(self.receive("STOPPING", 30), self.log_text())
        self.assertEqual(self.process.wait(timeout=60), 0, self.log_text())

    def test_2_exec_start_pre_refuses_a_bad_config_by_its_line(self):
        config = os.path.join(self.directory, "bad.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.replace("port: 80", "port: 80000"))
        environment = self.environment(config, os.path.join(self.directory, "unused"))
        result = run(*self.packaged(expand(self.unit["ExecStartPre"][0], environment)),
                     env=environment, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"bad.yaml:\d+:\d+: services\[0\]\.port")

    def test_3_without_cap_net_admin_berthd_refuses_and_names_the_port(self):
        self.start(without=("CAP_NET_ADMIN",))
        self.assertIsNone(self.receive("READY", 60))
        self.assertNotEqual(self.process.wait(timeout=60), 0)
        self.assertRegex(self.log_text(), r"port 'p0'.*Operation not permitted", self.log_text())

    def test_4_the_hugepages_unit_gives_back_what_it_reserved(self):
        unit = unit_settings(os.path.join(self.root, "lib/systemd/system/berth-hugepages.service"))
        pages = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
        with open(pages) as f:
            before = int(f.read())
        runtime = os.path.join(self.directory, "run-berth-hugepages")
        os.makedirs(runtime, exist_ok=True)
        environment = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "RUNTIME_DIRECTORY": runtime,
                       "BERTH_HUGEPAGES": str(before + 4)}
        try:
            run(*expand(unit["ExecStart"][0], environment), env=environment)
            with open(pages) as f:
                reserved = int(f.read())
            run(*expand(unit["ExecStop"][0], environment), env=environment)
            with open(pages) as f:
                after = int(f.read())
        finally:
            with open(pages, "w") as f:
                f.write(str(before))
        # The kernel may find fewer free 2 MiB pages than asked; what it found counts.
        self.assertGreater(reserved, before, "this machine could not reserve 4 hugepages")
        self.assertEqual(after, before)


if __name__ == "__main__":
    unittest.main(verbosity=2)
