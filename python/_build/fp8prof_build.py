"""fp8prof_build -- the PEP 517 build backend of the fp8prof Python package.

Standard library only, so that `pip install .` works without a network
(pip's isolated build environment then needs nothing from an index): it
builds the C library with the repository's Makefile (`make
build/libfp8prof.so`: a compiler and the Debian packages of README's setup
line), and writes a wheel holding the package's modules and that library
(fp8prof/libfp8prof.so, which the package loads first).  The library links
HDF5 and zlib from the system, not MPI.  No sdist: install from a checkout.
"""
import base64
import hashlib
import os
import subprocess
import sysconfig
import zipfile

NAME = "fp8prof"
VERSION = "1.0.0"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # python/_build/ -> the repository
PKG = os.path.join(ROOT, "python", NAME)

METADATA = """Metadata-Version: 2.1
Name: {name}
Version: {version}
Summary: FP8 training numerics: formats, scaling recipes, statistics, probes and HDF5 run files
License: see the repository
Requires-Python: >=3.8
Requires-Dist: numpy
""".format(name=NAME, version=VERSION)


def _tag():
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "py3-none-" + plat


def _distinfo():
    return "%s-%s.dist-info" % (NAME, VERSION)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, _distinfo())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(METADATA)
    return _distinfo()


def _library():
    """build/libfp8prof.so, built (or brought up to date) by make."""
    if not os.path.isfile(os.path.join(ROOT, "Makefile")):
        raise RuntimeError("fp8prof_build: no Makefile in %s: install from a checkout of the repository" % ROOT)
    r = subprocess.run(["make", "-C", ROOT, "build/libfp8prof.so"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise RuntimeError("fp8prof_build: `make build/libfp8prof.so` failed (README's setup line installs what it "
                           "needs):\n" + r.stdout.decode(errors="replace")[-3000:])
    return os.path.join(ROOT, "build", "libfp8prof.so")


def _record_line(arc, data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, h, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for fn in sorted(os.listdir(PKG)):
        if fn.endswith(".py") and fn != "_installed.py":  # (make install's, never packaged)
            with open(os.path.join(PKG, fn), "rb") as f:
                files.append(("%s/%s" % (NAME, fn), f.read()))
    with open(_library(), "rb") as f:
        files.append(("%s/libfp8prof.so" % NAME, f.read()))
    di = _distinfo()
    wheel = "Wheel-Version: 1.0\nGenerator: fp8prof_build\nRoot-Is-Purelib: false\nTag: %s\n" % _tag()
    files.append(("%s/METADATA" % di, METADATA.encode()))
    files.append(("%s/WHEEL" % di, wheel.encode()))
    files.append(("%s/top_level.txt" % di, (NAME + "\n").encode()))
    name = "%s-%s-%s.whl" % (NAME, VERSION, _tag())
    record = [_record_line(a, d) for a, d in files] + ["%s/RECORD,," % di]
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if arc.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
        z.writestr("%s/RECORD" % di, "\n".join(record) + "\n")
    return name
