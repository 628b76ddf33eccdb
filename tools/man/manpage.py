#!/usr/bin/env python3
"""Writes berth's manual pages from what the programs and the example config already say, so
that no page is kept by hand beside them:
  - a program's page from its own --help (berthctl's from its command table, which its --help
    prints), with NAME, DESCRIPTION, FILES and SEE ALSO below;
  - berth.yaml(5) from config/example.yaml, its comments as the text and its settings as the
    examples;
  - berthctl's bash completion from the same --help: its commands and flags.

Usage: manpage.py program PROGRAM SECTION OUT
       manpage.py config EXAMPLE_YAML OUT
       manpage.py completion BERTHCTL OUT
"""
import re
import subprocess
import sys

SOURCE = "berth"  # the footer's source, as .TH takes it

# What --help does not say: a line for NAME, and the page's prose.
PROGRAMS = {
    "berthd": {
        "summary": "berth's DPDK L4 load balancer daemon",
        "description": [
            "berthd drives the DPDK ports of its config, sends each flow addressed to a VIP to "
            "one backend chosen by Maglev consistent hashing, health-checks the backends, and "
            "answers berthctl over its control socket. Options before \"--\" are DPDK EAL "
            "options; berthd's own come after it.",
            "Under systemd (berthd.service, Type=notify) it reports READY=1 once every worker "
            "polls, pings the watchdog from its management loop every half of WatchdogSec, and "
            "reports STOPPING=1 when it stops.",
        ],
        "signals": [
            ("SIGTERM, SIGINT", "stop: with BGP announcements, the routes are withdrawn first "
             "and berthd forwards a little longer"),
            ("SIGHUP", "reload the config file; a bad file is refused and the running config "
             "keeps serving"),
            ("SIGUSR1", "print the counters"),
        ],
        "files": [
            ("/etc/berth/berth.yaml", "the config (berth.yaml(5))"),
            ("/run/berth/berth.sock", "the control socket, mode 0600"),
            ("/run/berth/berth-ro.sock", "the read-only socket (status, stats, announce), "
             "group berth"),
            ("/var/lib/berth/drains.json", "drains made with berthctl, kept across restarts"),
            ("/etc/default/berth", "the units' settings: config path, EAL options, hugepages"),
        ],
        "see_also": ["berthctl(8)", "berth.yaml(5)", "berth-announcer(8)", "berthgen(1)",
                     "systemd.service(5)"],
    },
    "berthctl": {
        "summary": "the operator's command line for berth",
        "description": [
            "berthctl checks and analyses config files offline, talks to a running berthd over "
            "its control socket, and pushes versions to a fleet's etcd. Exit status 0 on "
            "success, 1 on an error (its message on standard error), 3 when `fleet status` finds "
            "the instances disagree.",
        ],
        "files": [
            ("/run/berth/berth.sock", "berthd's control socket (--socket)"),
            ("/etc/berth/berth.yaml", "the config berthd.service serves"),
        ],
        "see_also": ["berthd(8)", "berth.yaml(5)", "berth-announcer(8)"],
    },
    "berthgen": {
        "summary": "traffic generator and verifying sink for berth",
        "description": [],  # its --help says it
        "see_also": ["berthd(8)", "berthctl(8)", "dpdk-testpmd(1)"],
    },
    "berth-announcer": {
        "summary": "keeps BIRD announcing the VIPs berthd serves",
        "description": [
            "berth-announcer asks berthd every --interval-ms which VIP routes it wants "
            "announced, writes them to BIRD's static route files under --routes-dir and runs "
            "`birdc configure`. A route is announced only while berthd forwards and its "
            "service has a healthy backend; every route is withdrawn when berthd stops "
            "answering for --berthd-timeout-ms, and on SIGTERM or SIGINT.",
        ],
        "files": [
            ("/run/berth-announcer/bird-routes4.conf, /run/berth-announcer/bird-routes6.conf",
             "the route files BIRD includes (berthctl bird-config), made empty at boot"),
            ("/run/berth/berth-ro.sock", "berthd's read-only socket (--socket)"),
        ],
        "see_also": ["berthd(8)", "berthctl(8)", "bird(8)"],
    },
}


def escape(text):
    """Text for roff: backslashes and hyphens escaped, no control character at a line's
    start."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"(?m)^([.'])", r"\\&\1", text)


def header(name, section, summary):
    return [".TH %s %s \"\" \"%s\" \"berth\"" % (name.upper(), section, SOURCE),
            ".SH NAME", "%s \\- %s" % (escape(name), escape(summary))]


def help_of(program):
    result = subprocess.run([program, "--help"], capture_output=True, text=True, check=True)
    return result.stdout


def entries(lines):
    """--help's indented lists as (term, text) pairs: a term at indent 2 (a command with its
    arguments, or an option), its text after a wide gap on the same line (berthgen's table) or
    on the lines below, indented further; lines below that go on with the arguments ("[",
    "--") belong to the term."""
    items = []
    for line in lines:
        if not line.strip():
            continue
        if len(line) - len(line.lstrip()) <= 2:
            gap = re.search(r"\s{2,}", line.strip())
            if gap and gap.end() + 2 >= 20:
                items.append([line.strip()[:gap.start()], line.strip()[gap.end():]])
            else:
                items.append([" ".join(line.split()), ""])
        elif items and not items[-1][1] and line.strip().startswith(("[", "--")):
            items[-1][0] += " " + " ".join(line.split())
        elif items:
            items[-1][1] = (items[-1][1] + " " + line.strip()).strip()
    return items


def program_page(program, section):
    name = program.rsplit("/", 1)[-1]
    about = PROGRAMS[name]
    text = help_of(program)
    out = header(name, section, about["summary"])
    blocks = [block.splitlines() for block in text.rstrip("\n").split("\n\n")]
    # The synopsis: a block that starts with the program's name, its lines joined.
    synopsis = [" ".join(line.strip() for line in block) for block in blocks
                if block[0].strip().startswith(name + " ")]
    out += [".SH SYNOPSIS"]
    for line in synopsis:
        # berth-announcer's one line is "SYNOPSIS: what it does".
        out += [".nf", escape(line.split(": ", 1)[0]), ".fi"]
    out += [".SH DESCRIPTION"]
    for paragraph in about["description"]:
        out += [".PP", escape(paragraph)]
    # The rest of --help in order: prose goes on the description; headed lists of commands and
    # options become their own sections.
    listed = False
    for number, lines in enumerate(blocks):
        if lines[0].strip().startswith(name + " "):
            continue
        if number == 0 and len(lines) == 1:
            continue  # the one-line summary NAME already gives
        if lines[0].endswith(":") and not lines[0].startswith(" "):
            heading, lines = lines[0][:-1], lines[1:]
            if heading == "Options":
                out += [".SH OPTIONS"]
            else:
                if not listed:
                    out += [".SH COMMANDS"]
                out += [".SS " + escape(heading)]
            listed = True
        if not lines:
            continue
        if lines[0].startswith("  "):
            if not listed:
                out += [".SH OPTIONS"]
                listed = True
            for term, description in entries(lines):
                out += [".TP", "\\fB%s\\fR" % escape(term), escape(description)]
        else:
            out += [".PP", escape(" ".join(line.strip() for line in lines))]
    if about.get("signals"):
        out += [".SH SIGNALS"]
        for signals, what in about["signals"]:
            out += [".TP", "\\fB%s\\fR" % escape(signals), escape(what)]
    if about.get("files"):
        out += [".SH FILES"]
        for path, what in about["files"]:
            out += [".TP", "\\fI%s\\fR" % escape(path), escape(what)]
    out += [".SH SEE ALSO", escape(", ".join(about["see_also"]))]
    return "\n".join(out) + "\n"


FIELD = re.compile(r"^[a-z_]+(, [a-z_]+)*( \(.*?\))?: ")
EXAMPLE = re.compile(r"^[a-z_]+(, [a-z_]+)*: ?([\[{\"0-9]|\S+$)")


def config_page(example):
    """berth.yaml(5): each top-level section of the example, its comments as paragraphs (a
    paragraph that starts with fields' names gets them in bold) and its settings as examples."""
    out = header("berth.yaml", "5", "berth's configuration file")
    with open(example) as f:
        raw = f.read().splitlines()
    # A section the example leaves commented out ("# fleet:" and its "#   " lines) is shown as
    # the others are.
    lines, commented = [], False
    for line in raw:
        if re.fullmatch(r"# [a-z_]+:", line):
            commented = True
        elif not (commented and line.startswith("#   ")):
            commented = False
            lines.append(line)
            continue
        lines.append(line[2:])
    out += [".SH SYNOPSIS", "/etc/berth/berth.yaml", ".SH DESCRIPTION"]
    comment, code = [], []

    def flush_comment():
        if not comment:
            return
        paragraph = " ".join(comment)
        fields = re.match(r"^([a-z_]+(?:, [a-z_]+)*(?: \(.*?\))?):\s+(.*)$", paragraph)
        if fields:
            out.extend([".TP", "\\fB%s\\fR" % escape(fields.group(1)), escape(fields.group(2))])
        else:
            out.extend([".PP", escape(paragraph)])
        comment.clear()

    def flush_code():
        if not code:
            return
        out.extend([".PP", ".RS 4", ".nf"] + [escape(line) for line in code] + [".fi", ".RE"])
        code.clear()

    for line in lines:
        stripped = line.strip()
        if not stripped:
            flush_comment()
            flush_code()
            continue
        if stripped.startswith("#"):
            text = stripped[1:].strip()
            if not text:
                flush_comment()
                continue
            # A field's text starts a paragraph of its own; a commented-out setting is an
            # example, shown as the settings are.
            if FIELD.match(text):
                flush_comment()
                if EXAMPLE.match(text) and not text.endswith("."):
                    code.append(line.replace("# ", "", 1))
                    continue
            flush_code()
            comment.append(text)
            continue
        if not line.startswith((" ", "-")):
            # A top-level section: its heading goes before the text that introduces it.
            flush_code()
            out.append(".SH " + escape(stripped.split(":")[0].upper()))
        flush_comment()
        code.append(line)
    flush_comment()
    flush_code()
    out += [".SH FILES", ".TP", "\\fI/etc/berth/berth.yaml\\fR",
            "the config berthd.service serves; `berthctl check --config FILE` checks a file as "
            "berthd would",
            ".SH SEE ALSO", "berthd(8), berthctl(8)"]
    return "\n".join(out) + "\n"


def completion(berthctl):
    """berthctl's bash completion: the commands and flags its --help lists."""
    text = help_of(berthctl)
    commands, flags = [], []
    section = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            section = line
            continue
        match = re.match(r"^  ([a-z][a-z-]*)\b", line)
        if match and section and not section.startswith("Options"):
            if match.group(1) not in commands:
                commands.append(match.group(1))
        flag = re.match(r"^  (--[a-z_]+)", line)
        if flag and section and section.startswith("Options"):
            flags.append(flag.group(1))
    return """# bash completion for berthctl, generated from its --help (tools/man/manpage.py).
_berthctl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    case $prev in
        --config|--against|--pcap|--plot|--socket|--routes-dir)
            COMPREPLY=($(compgen -f -- "$cur"))
            return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "%s" -- "$cur"))
    elif [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "%s" -- "$cur"))
    elif [[ ${COMP_WORDS[1]} == fleet && $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "push status" -- "$cur"))
    elif [[ ${COMP_WORDS[1]} == neighbors && $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "flush" -- "$cur"))
    fi
}
complete -F _berthctl berthctl
""" % (" ".join(flags), " ".join(commands))


def main():
    kind = sys.argv[1]
    if kind == "program":
        page = program_page(sys.argv[2], sys.argv[3])
        out = sys.argv[4]
    elif kind == "config":
        page = config_page(sys.argv[2])
        out = sys.argv[3]
    elif kind == "completion":
        page = completion(sys.argv[2])
        out = sys.argv[3]
    else:
        sys.exit("usage: manpage.py program|config|completion ...")
    with open(out, "w") as f:
        f.write(page)


if __name__ == "__main__":
    main()
