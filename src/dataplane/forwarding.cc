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
      return 0;
  }
  return 0;
}

}  // namespace berth
