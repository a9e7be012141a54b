# Debian's torchrun (torch 1.13.1) made usable on Python 3.11: its Std.from_str looks values up by iterating an
# IntFlag, which skips 0 and multi-bit members on 3.11 (fixed in torch 2.x). Replace it, then run torchrun as is.
import re, sys
from torch.distributed.elastic.multiprocessing import api
def _from_str(vm):
    if re.fullmatch(r"[0-3]", vm):
        return api.Std(int(vm))
    return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
api.Std.from_str = staticmethod(_from_str)
from torch.distributed.run import main
if __name__ == "__main__":
    sys.exit(main())
