/*
 * datasets.c — the HDF5 datatypes of run files (datasets.h).
 */
#include <string.h>

#include "datasets.h"

hid_t fp8__str_type(size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    return t;
}

hid_t fp8__record_type(int schema)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_record));
    hsize_t nc = FP8_NCLASS;
    hid_t cls = H5Tarray_create2(H5T_NATIVE_UINT64, 1, &nc);
    hid_t fmt = fp8__str_type(24);
    H5Tinsert(t, "tensor", HOFFSET(disk_record, tensor), H5T_NATIVE_UINT32);
    H5Tinsert(t, "recipe", HOFFSET(disk_record, recipe), H5T_NATIVE_UINT32);
    H5Tinsert(t, "step", HOFFSET(disk_record, step), H5T_NATIVE_INT64);
    H5Tinsert(t, "active", HOFFSET(disk_record, active), H5T_NATIVE_INT32);
    H5Tinsert(t, "rows", HOFFSET(disk_record, rows), H5T_NATIVE_UINT64);
    H5Tinsert(t, "cols", HOFFSET(disk_record, cols), H5T_NATIVE_UINT64);
    H5Tinsert(t, "classes", HOFFSET(disk_record, classes), cls);
    H5Tinsert(t, "format", HOFFSET(disk_record, format), fmt);
#define INS_U64(f) H5Tinsert(t, #f, HOFFSET(disk_record, f), H5T_NATIVE_UINT64);
#define INS_F64(f) H5Tinsert(t, #f, HOFFSET(disk_record, f), H5T_NATIVE_DOUBLE);
    STAT_FIELDS(INS_U64, INS_F64)
    if (schema >= 2)
        H5Tinsert(t, "hist", HOFFSET(disk_record, hist), H5T_NATIVE_UINT64);
    if (schema >= 3)
        H5Tinsert(t, "te_overflows", HOFFSET(disk_record, te_overflows), H5T_NATIVE_UINT64);
#undef INS_U64
#undef INS_F64
    H5Tclose(cls);
    H5Tclose(fmt);
    return t;
}

hid_t fp8__tensor_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_tensor)), s = fp8__str_type(FP8_NAME_MAX);
    H5Tinsert(t, "name", HOFFSET(disk_tensor, name), s);
    H5Tinsert(t, "role", HOFFSET(disk_tensor, role), H5T_NATIVE_INT32);
    H5Tinsert(t, "layer", HOFFSET(disk_tensor, layer), H5T_NATIVE_INT32);
    H5Tclose(s);
    return t;
}

hid_t fp8__recipe_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_recipe)), s = fp8__str_type(FP8_SPEC_MAX);
    H5Tinsert(t, "spec", HOFFSET(disk_recipe, spec), s);
    H5Tclose(s);
    return t;
}

hid_t fp8__name_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_name)), s = fp8__str_type(FP8_NAME_MAX);
    H5Tinsert(t, "name", HOFFSET(disk_name, name), s);
    H5Tclose(s);
    return t;
}

hid_t fp8__snap_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_snap));
    H5Tinsert(t, "tensor", HOFFSET(disk_snap, tensor), H5T_NATIVE_UINT32);
    H5Tinsert(t, "step", HOFFSET(disk_snap, step), H5T_NATIVE_INT64);
    H5Tinsert(t, "offset", HOFFSET(disk_snap, offset), H5T_NATIVE_UINT64);
    H5Tinsert(t, "rows", HOFFSET(disk_snap, rows), H5T_NATIVE_UINT64);
    H5Tinsert(t, "cols", HOFFSET(disk_snap, cols), H5T_NATIVE_UINT64);
    H5Tinsert(t, "recipe", HOFFSET(disk_snap, recipe), H5T_NATIVE_INT32);
    H5Tinsert(t, "code_bytes", HOFFSET(disk_snap, code_bytes), H5T_NATIVE_INT32);
    H5Tinsert(t, "codes_offset", HOFFSET(disk_snap, codes_offset), H5T_NATIVE_UINT64);
    H5Tinsert(t, "scales_offset", HOFFSET(disk_snap, scales_offset), H5T_NATIVE_UINT64);
    H5Tinsert(t, "nscales", HOFFSET(disk_snap, nscales), H5T_NATIVE_UINT64);
    return t;
}

hid_t fp8__scalar_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_scalar));
    H5Tinsert(t, "id", HOFFSET(disk_scalar, id), H5T_NATIVE_UINT32);
    H5Tinsert(t, "step", HOFFSET(disk_scalar, step), H5T_NATIVE_INT64);
    H5Tinsert(t, "value", HOFFSET(disk_scalar, value), H5T_NATIVE_DOUBLE);
    return t;
}

hid_t fp8__step_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_step));
    H5Tinsert(t, "tensor", HOFFSET(disk_step, tensor), H5T_NATIVE_UINT32);
    H5Tinsert(t, "recipe", HOFFSET(disk_step, recipe), H5T_NATIVE_UINT32);
    H5Tinsert(t, "step", HOFFSET(disk_step, step), H5T_NATIVE_INT64);
    H5Tinsert(t, "amax", HOFFSET(disk_step, amax), H5T_NATIVE_FLOAT);
    H5Tinsert(t, "scale", HOFFSET(disk_step, scale), H5T_NATIVE_FLOAT);
    H5Tinsert(t, "nonfinite", HOFFSET(disk_step, nonfinite), H5T_NATIVE_UINT32);
    H5Tinsert(t, "active", HOFFSET(disk_step, active), H5T_NATIVE_INT32);
    return t;
}

hid_t fp8__bamax_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(disk_bamax));
    H5Tinsert(t, "tensor", HOFFSET(disk_bamax, tensor), H5T_NATIVE_UINT32);
    H5Tinsert(t, "step", HOFFSET(disk_bamax, step), H5T_NATIVE_INT64);
    H5Tinsert(t, "rows", HOFFSET(disk_bamax, rows), H5T_NATIVE_UINT64);
    H5Tinsert(t, "cols", HOFFSET(disk_bamax, cols), H5T_NATIVE_UINT64);
    H5Tinsert(t, "block", HOFFSET(disk_bamax, block), H5T_NATIVE_UINT32);
    H5Tinsert(t, "offset", HOFFSET(disk_bamax, offset), H5T_NATIVE_UINT64);
    H5Tinsert(t, "count", HOFFSET(disk_bamax, count), H5T_NATIVE_UINT64);
    return t;
}

int fp8__write_str_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = fp8__str_type(strlen(value) + 1), sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, t, value);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return e < 0 ? -1 : 0;
}

/* ---- the datasets ---------------------------------------------------------- */

static hid_t u64_type(void) { return H5Tcopy(H5T_NATIVE_UINT64); }
static hid_t f32_type(void) { return H5Tcopy(H5T_NATIVE_FLOAT); }
static hid_t u8_type(void) { return H5Tcopy(H5T_NATIVE_UINT8); }
static hid_t record_type(void) { return fp8__record_type(FP8_STORE_SCHEMA); }

const fp8__dataset fp8__datasets[ND] = {
    [D_TENSORS] = {"tensors", fp8__tensor_type, sizeof(disk_tensor), 0, 256, FP8__ESSENTIAL, 0},
    [D_RECIPES] = {"recipes", fp8__recipe_type, sizeof(disk_recipe), 0, 256, FP8__ESSENTIAL, 0},
    [D_SCALAR_NAMES] = {"scalar_names", fp8__name_type, sizeof(disk_name), 0, 256, FP8__ESSENTIAL, 0},
    [D_RECORDS] = {"records", record_type, sizeof(disk_record), 0, 64, FP8__ESSENTIAL, 0},
    [D_EXP_HIST] = {"exp_hist", u64_type, FP8_EXP_BINS * sizeof(uint64_t), FP8_EXP_BINS, 16, FP8__ESSENTIAL, 0},
    [D_SCALE_HIST] = {"scale_hist", u64_type, FP8_SCALE_BINS * sizeof(uint64_t), FP8_SCALE_BINS, 16, FP8__ESSENTIAL, 0},
    [D_SCALARS] = {"scalars", fp8__scalar_type, sizeof(disk_scalar), 0, 256, FP8__ESSENTIAL, 0},
    [D_SNAP_DATA] = {"snapshot_data", f32_type, sizeof(float), 0, 65536, FP8__SNAPSHOTS, 1},
    [D_SNAP_CODES] = {"snapshot_codes", u8_type, 1, 0, 65536, FP8__SNAPSHOTS, 0},
    [D_SNAP_SCALES] = {"snapshot_scales", f32_type, sizeof(float), 0, 65536, FP8__SNAPSHOTS, 1},
    [D_SNAP_INDEX] = {"snapshot_index", fp8__snap_type, sizeof(disk_snap), 0, 256, FP8__SNAPSHOTS, 0},
    [D_STEPS] = {"steps", fp8__step_type, sizeof(disk_step), 0, 1024, FP8__ESSENTIAL, 0},
    [D_BAMAX_DATA] = {"block_amax", f32_type, sizeof(float), 0, 65536, FP8__BLOCK_AMAX, 1},
    [D_BAMAX_INDEX] = {"block_amax_index", fp8__bamax_type, sizeof(disk_bamax), 0, 256, FP8__BLOCK_AMAX, 0},
};

const int fp8__flush_order[ND] = {D_TENSORS, D_RECIPES,    D_SCALAR_NAMES, D_EXP_HIST,    D_SCALE_HIST,
                                  D_RECORDS, D_SCALARS,    D_STEPS,        D_SNAP_DATA,   D_SNAP_CODES,
                                  D_SNAP_SCALES, D_SNAP_INDEX, D_BAMAX_DATA, D_BAMAX_INDEX};
