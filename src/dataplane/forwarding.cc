#include "berth/dataplane/forwarding.h"

#include "dataplane/encapsulation.h"

namespace berth {

ForwardFunction forwardFunctionFor(Forwarding mode) {
  switch (mode) {
    case Forwarding::kIpip:
      return forwardIpip;
    case Forwarding::kGue:
      return forwardGue;
    case Forwarding::kGre:
      return forwardGre;
    case Forwarding::kL2Dsr:
      return forwardL2Dsr;
    case Forwarding::kFullNat:
      // The pipeline rewrites fullnat packets through their session (fullnat_path.h); its L2
      // step is l2dsr's.
      return forwardL2Dsr;
  }
  return forwardIpip;
}

size_t encapsulationOverhead(Forwarding mode, IpFamily outer) {
  switch (mode) {
    case Forwarding::kIpip:
      return outerIpLength(outer);
    case Forwarding::kGue:
      return outerIpLength(outer) + kUdpLength;
    case Forwarding::kGre:
      return outerIpLength(outer) + kGreLength;
    case Forwarding::kL2Dsr:
    case Forwarding::kFullNat:
      return 0;
  }
  return 0;
}

}  // namespace berth
