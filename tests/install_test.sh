#!/bin/sh
# install_test.sh — what a user of the installed toolkit does, on a scratch
# prefix: `make install`, then
#  - the installed libfp8prof.so links no MPI (any process can load it);
#  - a C probe program built with nothing but `pkg-config --cflags --libs
#    fp8prof` (both include spellings) runs and writes a run `fp8prof info`
#    reads; one built against fp8prof_mpi links too;
#  - `pip install .` into a venv (no network, no PYTHONPATH) imports, casts,
#    records, and `pip uninstall` removes it (skipped, saying so, without
#    python3-venv).
# usage: tests/install_test.sh   (from the repository, after make)
set -u
top=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install test: FAILED: $*" >&2; exit 1; }
make -s install BUILD="${BUILD:-build}" PREFIX="$tmp/prefix" PYDIR="$tmp/pydir" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install"; }
lib="$tmp/prefix/lib/libfp8prof.so"
ldd "$lib" | grep -qi mpi && fail "$lib links MPI: $(ldd "$lib" | grep -i mpi)"
ldd "$tmp/prefix/lib/libfp8prof_mpi.so" | grep -q libmpi || fail "libfp8prof_mpi.so does not link libmpi"
cat > "$tmp/probe.c" <<'C'
#include <fp8prof/fp8_probe.h>
#include <fp8_probe.h> /* both spellings */
#include <stdio.h>
int main(int argc, char **argv)
{
    (void)argc;
    const char *meta[] = {"recipe", "e4m3:current", "applied", "yes"};
    fp8_probe_run *run = fp8_probe_open(argv[1], NULL, meta, 2);
    fp8_probe *p = run ? fp8_probe_declare(run, "x.input", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0) : NULL;
    float x[64];
    for (int s = 0; p && s < 3; s++) {
        for (int i = 0; i < 64; i++)
            x[i] = (float)(i - 32) * (float)(s + 1);
        if (fp8_probe_apply(p, s, x, 4, 16, x) != FP8_OK || fp8_probe_step_end(run, s) != FP8_OK)
            break;
    }
    if (!p || fp8_probe_close(run) != FP8_OK) {
        fprintf(stderr, "probe: %s\n", fp8_error_message());
        return 1;
    }
    return 0;
}
C
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc -o "$tmp/probe" "$tmp/probe.c" $(pkg-config --cflags --libs fp8prof) -Wl,-rpath,"$tmp/prefix/lib" \
    || fail "a probe program built with pkg-config fp8prof"
"$tmp/probe" "$tmp/run.h5" || fail "the probe program"
"$tmp/prefix/bin/fp8prof" info "$tmp/run.h5" | grep -q "x.input" || fail "fp8prof info on its run"
# shellcheck disable=SC2046
echo 'int main(void) { return 0; }' > "$tmp/m.c"
cc -o "$tmp/m" "$tmp/m.c" $(pkg-config --cflags --libs fp8prof_mpi) || fail "pkg-config fp8prof_mpi"
echo "install test: $lib links no MPI; a pkg-config-built probe program ran"
if ! /usr/bin/python3 -m venv --system-site-packages "$tmp/v" > "$tmp/venv.log" 2>&1; then
    echo "install test: pip part skipped: /usr/bin/python3 -m venv failed (apt-get install python3-venv)"
    exit 0
fi
(cd "$tmp" && "$tmp/v/bin/pip" install --no-index "$top") > "$tmp/pip.log" 2>&1 || { tail -20 "$tmp/pip.log"; fail "pip install ."; }
(cd "$tmp" && "$tmp/v/bin/python" - <<'PY') || fail "the pip-installed package"
import os, numpy as np, fp8prof, fp8prof._lib as L
assert L.lib._name.startswith(os.path.dirname(fp8prof.__file__)), L.lib._name  # its own library
assert list(fp8prof.cast(np.array([464.0, 500.0], dtype=np.float32), "e4m3")) == [0x7E, 0x7E]
with fp8prof.Run("p.h5", meta={"recipe": "e4m3:current"}) as run:
    p = run.probe("x.input", "activation", 0, "e4m3:current", [])
    p.apply(0, np.ones((2, 8), dtype=np.float32)); run.step_end(0)
r = fp8prof.open_run("p.h5"); assert len(r.records) == 1; r.close()
PY
"$tmp/v/bin/pip" uninstall -y fp8prof > /dev/null 2>&1 || fail "pip uninstall"
(cd "$tmp" && "$tmp/v/bin/python" -c "import fp8prof" 2> /dev/null) && fail "fp8prof still importable after pip uninstall"
echo "install test: pip install . into a venv imported, cast and recorded; pip uninstall removed it"
