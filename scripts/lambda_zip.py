#!/usr/bin/env python3
"""Zip a Lambda bootstrap reproducibly: lambda_zip.py OUT.zip path/to/bootstrap

The entry is named `bootstrap`, mode 0755, with a fixed timestamp, so the same
binary always gives the same zip (and the same code hash in SAM/CDK).
"""

import sys
import zipfile


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: lambda_zip.py OUT.zip BOOTSTRAP")
    out, src = sys.argv[1], sys.argv[2]
    info = zipfile.ZipInfo("bootstrap", date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = (0o100755 << 16)  # regular file, rwxr-xr-x
    info.create_system = 3  # unix, so the mode is honoured
    info.compress_type = zipfile.ZIP_DEFLATED
    with open(src, "rb") as f:
        data = f.read()
    with zipfile.ZipFile(out, "w") as z:
        # zlib's default level: on a 22 MB bootstrap level 9 saves 0.5 % of
        # the zip for 2.7 times the CPU (2.5 s against 0.9 s per function).
        z.writestr(info, data, compresslevel=6)


if __name__ == "__main__":
    main()
