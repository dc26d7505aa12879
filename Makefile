# fp8prof — build, test, bench.  `make help` lists the targets.
CC      ?= cc
BUILD   ?= build
SAN     ?=
OPT     ?= -O2
PKGS    := gsl hdf5 cunit openblas zlib ompi-c
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
# GSL takes its CBLAS from OpenBLAS (not the slow reference libgslcblas)
PKG_LIBS   := $(filter-out -lgslcblas,$(shell pkg-config --libs $(PKGS)))
# Numerics must not be rewritten by the compiler: no fast-math, no FMA contraction.
CFLAGS_ALL := -std=c11 -D_GNU_SOURCE $(OPT) -g -fPIC -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
              -fno-fast-math -ffp-contract=off $(PKG_CFLAGS) $(SAN) $(CFLAGS)
LDLIBS_ALL := $(PKG_LIBS) -lpthread -lm $(SAN) $(LDFLAGS)
# what the libraries themselves link: libfp8prof HDF5 and zlib only (no MPI,
# so any process can load it), libfp8prof_mpi MPI on top of it
LIB_LIBS   := $(shell pkg-config --libs hdf5 zlib) -lpthread -lm
MPI_LIBS   := $(shell pkg-config --libs ompi-c)

# The layers, and the include folders each may use: a file sees the folders
# of its own wing and of those below it, never one above (docs/layout.md).
# Inside lib the wings stack import > store > engine > format > util.
INC_util    := -Ilib/util
INC_format  := $(INC_util) -Ilib/format
INC_engine  := $(INC_format) -Ilib/engine
INC_store   := $(INC_engine) -Ilib/store
INC_import  := $(INC_store) -Ilib/import
INC_probes  := $(INC_import) -Iprobes
INC_train   := $(INC_probes) -Itrain
INC_core    := $(INC_import) -Ianalyses/core
INC_analyses := $(INC_core) -Ianalyses -Iplots
INC_plots   := -Iplots
INC_report  := $(INC_analyses) -Ireport
INC_cli     := $(INC_report) -Iprobes -Itrain -Icli
INC_bench   := $(INC_cli) -Itests/ref
INC_tests   := $(INC_cli) -Itests -Itests/ref
$(foreach w,util format engine store import,$(eval $(BUILD)/lib/$(w)/%.o: INC := $(INC_$(w))))
$(foreach w,probes train plots report cli bench tests,$(eval $(BUILD)/$(w)/%.o: INC := $(INC_$(w))))
$(BUILD)/analyses/core/%.o: INC := $(INC_core)
$(BUILD)/analyses/%.o: INC := $(INC_analyses)

LIB_WINGS := util format engine store import
# Vector loops (*_vec.c) are built once per instruction set and picked at run time.
VEC_SRC  := lib/format/kernel_vec.c lib/engine/stats_vec.c lib/engine/moments_vec.c lib/engine/range_vec.c \
            lib/engine/smooth_vec.c
MPI_SRC  := probes/mpi.c
LIB_SRC  := $(filter-out $(VEC_SRC),$(foreach w,$(LIB_WINGS),$(wildcard lib/$(w)/*.c))) \
            $(filter-out $(MPI_SRC),$(wildcard probes/*.c))
ifeq ($(shell uname -m),x86_64)
ISAS     := avx512 avx2 base
else
ISAS     := base
endif
VEC_OBJ  := $(foreach s,$(VEC_SRC:%.c=%),$(foreach i,$(ISAS),$(BUILD)/$(s)_$(i).o))
ISA_FLAGS_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -Wno-psabi
ISA_FLAGS_avx2   := -mavx2 -Wno-psabi
ISA_FLAGS_base   := -Wno-psabi
CLI_SRC  := $(wildcard cli/*.c)
# the layers above lib: the trainer, analyses, the report, plots (gnuplot
# scripts are embedded into the binary as C strings, generated from plots/*.gp)
DATA_SRC := $(wildcard train/*.c) $(wildcard analyses/core/*.c) $(wildcard analyses/*.c) $(wildcard report/*.c) \
            $(wildcard plots/*.c)
GP_SRC   := $(sort $(wildcard plots/*.gp))
DATA_OBJ := $(DATA_SRC:%.c=$(BUILD)/%.o) $(BUILD)/plots/scripts.o
TEST_SRC := $(filter-out tests/check_exhaustive.c tests/mpi_%.c,$(wildcard tests/*.c)) $(wildcard tests/ref/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(VEC_OBJ)
MPI_OBJ  := $(MPI_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
DEPS     := $(LIB_OBJ:.o=.d) $(MPI_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(DATA_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(patsubst %.c,$(BUILD)/%.d,$(wildcard bench/*.c)) $(patsubst tests/%.c,$(BUILD)/tests/%.d,$(wildcard tests/mpi_*.c))

MAKEFLAGS += --no-builtin-rules
.SUFFIXES:

.PHONY: all test asan tsan demo study bench check-exhaustive clean help deps-check datasets fuzz fuzz-build check-report \
        install uninstall python-test
LIBS_A := $(BUILD)/libfp8prof_mpi.a $(BUILD)/libfp8prof.a
all: $(BUILD)/libfp8prof.a $(BUILD)/libfp8prof.so $(BUILD)/libfp8prof_mpi.a $(BUILD)/libfp8prof_mpi.so $(BUILD)/fp8prof

help:
	@echo "make            library (static+shared) and build/fp8prof"
	@echo "make demo       ten short FP8 training runs and their report (build/demo/report/index.html, findings.md)"
	@echo "make study      STUDY_K seeds (3) of each STUDY_RECIPES, then the loss equivalence test (build/study/loss.md)"
	@echo "make test       the whole CUnit suite"
	@echo "make asan       the suite under AddressSanitizer + UBSan"
	@echo "make tsan       the suite under ThreadSanitizer (the thread pool, the background writer)"
	@echo "make bench      speed numbers next to same-run references"
	@echo "make check-exhaustive  every float32 through every format and mode"
	@echo "make datasets   the standard set of training runs into datasets/runs/"
	@echo "make install    PREFIX=/usr/local DESTDIR=: library, headers, fp8prof.pc, fp8prof, the Python package"
	@echo "make uninstall  removes what make install put there"
	@echo "make check-report  the demo report in headless Chromium: broken images, dead links, page errors (needs chromium)"
	@echo "make fuzz       libFuzzer on the .npy, TE log, run-file and rank-index readers, FUZZ_SECONDS each (needs clang)"

$(BUILD)/plots/scripts.c: $(GP_SRC) plots/embed.sh
	@mkdir -p $(dir $@)
	sh plots/embed.sh $(GP_SRC) > $@

$(BUILD)/plots/scripts.o: $(BUILD)/plots/scripts.c
	$(CC) $(CFLAGS_ALL) $(INC_plots) -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(INC) -MMD -MP -c $< -o $@

# VEC_CC / VEC_SAN: the vector loops use GCC vector extensions; the fuzz
# build (clang) compiles them with gcc, uninstrumented
VEC_CC  ?= $(CC)
VEC_SAN ?= $(SAN)
define isa_rule
$(BUILD)/lib/%_$(1).o: lib/%.c
	@mkdir -p $$(dir $$@)
	$$(VEC_CC) $$(filter-out $$(SAN),$$(CFLAGS_ALL)) $$(INC) $$(VEC_SAN) $$(ISA_FLAGS_$(1)) -DFP8_ISA=$(1) -MMD -MP -c $$< -o $$@
endef
$(foreach i,$(ISAS),$(eval $(call isa_rule,$(i))))

$(BUILD)/libfp8prof.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libfp8prof.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libfp8prof.so.$(SOVERSION) -o $@ $^ $(LIB_LIBS) $(SAN) $(LDFLAGS)

$(BUILD)/libfp8prof_mpi.a: $(MPI_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libfp8prof_mpi.so: $(MPI_OBJ) $(BUILD)/libfp8prof.so
	$(CC) -shared -Wl,-soname,libfp8prof_mpi.so.$(SOVERSION) -o $@ $(MPI_OBJ) -L$(BUILD) -lfp8prof $(MPI_LIBS) \
	    $(SAN) $(LDFLAGS)

$(BUILD)/fp8prof: $(CLI_OBJ) $(DATA_OBJ) $(LIBS_A)
	$(CC) -o $@ $(CLI_OBJ) $(DATA_OBJ) $(LIBS_A) $(LDLIBS_ALL)

$(BUILD)/test_fp8prof: $(TEST_OBJ) $(DATA_OBJ) $(LIBS_A)
	$(CC) -o $@ $(TEST_OBJ) $(DATA_OBJ) $(LIBS_A) $(LDLIBS_ALL)

$(BUILD)/check_exhaustive: $(BUILD)/tests/check_exhaustive.o $(BUILD)/tests/ref/ref_cast.o $(BUILD)/libfp8prof.a
	$(CC) -o $@ $^ $(LDLIBS_ALL)

BENCH_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard bench/*.c)) $(BUILD)/tests/ref/ref_stats.o $(DATA_OBJ)
$(BUILD)/bench_fp8prof: $(BENCH_OBJ) $(LIBS_A)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

# helper programs the suite runs under mpirun (tests/mpi_*.c)
.SECONDARY: $(patsubst tests/%.c,$(BUILD)/tests/%.o,$(wildcard tests/mpi_*.c))
$(BUILD)/mpi_%: $(BUILD)/tests/mpi_%.o $(LIBS_A)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

# The suites whose numbers the vector loops make, run again with each
# narrower instruction set this CPU also has (FP8PROF_ISA: lib/util/isa.h):
# the full run uses the widest, and a machine without AVX-512 runs AVX2.
ISA_SUITES := cast device exp_hist fenv format gemm layers model nvfp4 probe recipe shadows stats stats_parts sweeps
test: $(BUILD)/test_fp8prof $(BUILD)/fp8prof $(BUILD)/libfp8prof.so $(BUILD)/mpi_mismatch
	FP8PROF=$(BUILD)/fp8prof $(BUILD)/test_fp8prof
	for isa in avx2 base; do \
	    echo "suites under FP8PROF_ISA=$$isa: $(ISA_SUITES)"; \
	    FP8PROF_ISA=$$isa FP8PROF=$(BUILD)/fp8prof $(BUILD)/test_fp8prof $(ISA_SUITES) || exit 1; \
	done
ifeq ($(SAN),)
	$(MAKE) --no-print-directory python-test
	BUILD=$(BUILD) tests/install_test.sh
endif

# the Python package against the C engine and independent references (not
# under the sanitizers: the interpreter would have to load their runtimes first)
python-test: $(BUILD)/fp8prof $(BUILD)/libfp8prof.so
	FP8PROF=$(BUILD)/fp8prof FP8PROF_LIB=$(abspath $(BUILD)/libfp8prof.so) PYTHONPATH=python \
	    $(PYTHON) -m unittest discover -s python/tests

asan:
	$(MAKE) BUILD=build/asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" test

# tsan: the suite under ThreadSanitizer (the probes' thread pool and the
# casts they run side by side, the background writer, probes recording from
# several threads).  A report fails the run (TSan's exit status); a test's
# forked child may start the pool's threads again, which TSan allows only
# with die_after_fork=0
tsan:
	TSAN_OPTIONS="die_after_fork=0 $$TSAN_OPTIONS" $(MAKE) BUILD=build/tsan OPT=-O1 \
	    SAN="-fsanitize=thread -fno-omit-frame-pointer" test

# install: the libraries (static + versioned shared: libfp8prof, which links
# no MPI, and libfp8prof_mpi), the public headers under include/fp8prof/,
# pkg-config's fp8prof.pc and fp8prof_mpi.pc (both let #include <fp8_probe.h>
# and <fp8prof/fp8_probe.h> work), the command and the Python package (for
# Debian's /usr/bin/python3)
VERSION   := 1.0.0
SOVERSION := 1
PREFIX    ?= /usr/local
DESTDIR   ?=
LIBDIR    ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
INCDIR    ?= $(INCLUDEDIR)/fp8prof
PCDIR     ?= $(LIBDIR)/pkgconfig
PYTHON    ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
# where Debian's python3 looks: /usr/lib/python3/dist-packages for /usr,
# <prefix>/lib/python3.X/dist-packages for any other prefix (/usr/local)
PYVER      = $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PYDIR     ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python$(PYVER)/dist-packages)
PUB_HDR   := lib/engine/fp8.h lib/util/fp8_error.h lib/format/fp8_format.h lib/engine/fp8_recipe.h \
             lib/engine/fp8_stats.h lib/store/fp8_store.h lib/import/fp8_npy.h lib/import/fp8_nvdlfw.h \
             lib/util/fp8_file.h lib/store/fp8_ranks.h probes/fp8_probe.h probes/fp8_probe_mpi.h
PY_SRC    := $(wildcard python/fp8prof/*.py)
install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) $(DESTDIR)$(PCDIR) $(DESTDIR)$(PREFIX)/bin \
	           $(DESTDIR)$(PYDIR)/fp8prof
	for l in fp8prof fp8prof_mpi; do \
	    install -m 644 $(BUILD)/lib$$l.a $(DESTDIR)$(LIBDIR)/ && \
	    install -m 755 $(BUILD)/lib$$l.so $(DESTDIR)$(LIBDIR)/lib$$l.so.$(VERSION) && \
	    ln -sf lib$$l.so.$(VERSION) $(DESTDIR)$(LIBDIR)/lib$$l.so.$(SOVERSION) && \
	    ln -sf lib$$l.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/lib$$l.so && \
	    sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
	        -e 's|@PRIVATE@|$(LIB_LIBS)|' $$l.pc.in > $(DESTDIR)$(PCDIR)/$$l.pc || exit 1; \
	done
	install -m 644 $(PUB_HDR) $(DESTDIR)$(INCDIR)/
	install -m 755 $(BUILD)/fp8prof $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(PY_SRC) $(DESTDIR)$(PYDIR)/fp8prof/
	echo 'LIBRARY = "$(LIBDIR)/libfp8prof.so.$(SOVERSION)"' > $(DESTDIR)$(PYDIR)/fp8prof/_installed.py

uninstall:
	for l in fp8prof fp8prof_mpi; do \
	    rm -f $(DESTDIR)$(LIBDIR)/lib$$l.a $(DESTDIR)$(LIBDIR)/lib$$l.so $(DESTDIR)$(LIBDIR)/lib$$l.so.$(SOVERSION) \
	          $(DESTDIR)$(LIBDIR)/lib$$l.so.$(VERSION) $(DESTDIR)$(PCDIR)/$$l.pc; \
	done
	rm -f $(DESTDIR)$(PREFIX)/bin/fp8prof
	rm -rf $(DESTDIR)$(INCDIR) $(DESTDIR)$(PYDIR)/fp8prof

# fuzzing: clang's libFuzzer with ASan + UBSan, one target per reader;
# corpora grow in build/fuzz/corpus/, crashes land in build/fuzz/crash-*
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer
fuzz:
	@command -v clang >/dev/null || { echo "make fuzz needs clang with libFuzzer (apt-get install clang)"; exit 1; }
	$(MAKE) BUILD=build/fuzz CC=clang VEC_CC=gcc VEC_SAN= OPT=-O1 SAN="$(FUZZ_SAN)" fuzz-build
	tests/fuzz/run.sh build/fuzz $(FUZZ_SECONDS)

.PRECIOUS: $(BUILD)/tests/fuzz/%.o
FUZZ_COMMON := $(BUILD)/tests/fuzz/fuzz_common.o $(DATA_OBJ) $(LIBS_A)
fuzz-build: $(BUILD)/fuzz_npy $(BUILD)/fuzz_nvdlfw $(BUILD)/fuzz_run $(BUILD)/fuzz_ranks $(BUILD)/fuzz-seeds
$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_COMMON)
	$(CC) -fsanitize=fuzzer -o $@ $^ $(LDLIBS_ALL)
$(BUILD)/fuzz-seeds: $(BUILD)/tests/fuzz/seeds.o $(LIBS_A)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

check-report: $(BUILD)/fp8prof
	@test -f $(BUILD)/demo/report/index.html || $(MAKE) demo
	tests/check_report.sh $(BUILD)/demo/report/index.html $(BUILD)/check-report

demo: $(BUILD)/fp8prof
	datasets/demo.sh $(BUILD)/fp8prof $(BUILD)/demo

# K replicates per recipe and the loss's equivalence test over them
STUDY_K ?= 3
STUDY_STEPS ?= 250
STUDY_RECIPES ?= bf16 hybrid:delayed:history=64 e4m3:current
study: $(BUILD)/fp8prof
	datasets/study.sh $(BUILD)/fp8prof $(BUILD)/study $(STUDY_K) $(STUDY_STEPS) $(STUDY_RECIPES)

bench: $(BUILD)/bench_fp8prof $(BUILD)/fp8prof $(BUILD)/libfp8prof.so
ifeq ($(filter python torch,$(BENCH)),)
	$(BUILD)/bench_fp8prof $(BENCH)
endif
ifeq ($(filter-out python,$(BENCH)),)
	FP8PROF_LIB=$(abspath $(BUILD)/libfp8prof.so) $(PYTHON) bench/bench_python.py $(BUILD)
endif
ifeq ($(filter-out torch,$(BENCH)),)
	FP8PROF_LIB=$(abspath $(BUILD)/libfp8prof.so) $(PYTHON) bench/bench_torch.py
endif

datasets: $(BUILD)/fp8prof
	datasets/make_datasets.sh $(BUILD)/fp8prof datasets/runs

check-exhaustive: $(BUILD)/check_exhaustive
	$(BUILD)/check_exhaustive

deps-check:
	@pkg-config --exists $(PKGS) || { echo "missing: pkg-config modules $(PKGS) (see README setup line)"; exit 1; }
	@command -v gnuplot >/dev/null || { echo "missing: gnuplot (see README setup line)"; exit 1; }
	@echo "dependencies found: $(PKGS) gnuplot"

clean:
	rm -rf build

-include $(DEPS)
