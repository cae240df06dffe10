// Runs math.cuh's scalar helpers on the host, for test_cuda_kernels.py (compiled with nvcc
// after kernels.source("math.cuh"), which this file does not include itself).
//
//   harness <op> <f32|f64|i32|i64> <n> <a.bin> <b.bin> <out.bin>
//
// a and b hold n values of the type (b is ignored by unary ops); out receives n values of
// the type (sort: n positions as int64, the argsort the bitonic network gives;
// search_right: for each b[i] its searchsorted(a, b[i], side="right") in the sorted a).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

template <typename T> static std::vector<T> load(const char* path, long long n) {
    std::vector<T> v(n > 0 ? n : 1);
    FILE* f = std::fopen(path, "rb");
    if (!f || (n && std::fread(v.data(), sizeof(T), n, f) != (size_t)n)) std::exit(2);
    std::fclose(f);
    return v;
}

template <typename T> static void save(const char* path, const std::vector<T>& v, long long n) {
    FILE* f = std::fopen(path, "wb");
    if (!f || (n && std::fwrite(v.data(), sizeof(T), n, f) != (size_t)n)) std::exit(3);
    std::fclose(f);
}

template <typename T> static int sort(long long n, const std::vector<T>& x, const char* out) {
    long long P = 1;
    while (P < n) P *= 2;
    std::vector<T> vals(P, T(0));
    std::vector<long long> pos(P);
    for (long long j = 0; j < P; ++j) {
        if (j < n) vals[j] = x[j];
        pos[j] = j;
    }
    for (long long k = 2; k <= P; k *= 2)
        for (long long j = k / 2; j >= 1; j /= 2)
            for (long long t = 0; t < P; ++t) tg_sort_step_at(vals.data(), pos.data(), t, n, P, k, j);
    save(out, pos, n);
    return 0;
}

template <typename T> static int search(long long n, const std::vector<T>& a,
                                        const std::vector<T>& b, const char* out) {
    std::vector<long long> r(n > 0 ? n : 1);
    for (long long i = 0; i < n; ++i) r[i] = tg_search_right(a.data(), n, b[i]);
    save(out, r, n);
    return 0;
}

template <typename T> static int run_float(const char* op, long long n, const char* pa,
                                           const char* pb, const char* out) {
    std::vector<T> a = load<T>(pa, n), b = load<T>(pb, n), r(n > 0 ? n : 1);
    if (!std::strcmp(op, "sort")) return sort(n, a, out);
    if (!std::strcmp(op, "search_right")) return search(n, a, b, out);
    for (long long i = 0; i < n; ++i) {
        const T u = a[i], v = b[i];
        if (!std::strcmp(op, "remainder")) r[i] = tg_fremainder(u, v);
        else if (!std::strcmp(op, "floor_divide")) r[i] = tg_ffloor_divide(u, v);
        else if (!std::strcmp(op, "logaddexp")) r[i] = tg_logaddexp(u, v);
        else if (!std::strcmp(op, "logaddexp2")) r[i] = tg_logaddexp2(u, v);
        else if (!std::strcmp(op, "heaviside")) r[i] = tg_heaviside(u, v);
        else if (!std::strcmp(op, "sinc")) r[i] = tg_sinc(u);
        else if (!std::strcmp(op, "nan_to_num")) r[i] = tg_nan_to_num(u, T(5), T(7), T(-9));
        else if (!std::strcmp(op, "round_mul")) r[i] = tg_round(u, v, false);
        else if (!std::strcmp(op, "round_div")) r[i] = tg_round(u, v, true);
        else return 4;
    }
    save(out, r, n);
    return 0;
}

template <typename T> static int run_int(const char* op, long long n, const char* pa,
                                         const char* pb, const char* out) {
    std::vector<T> a = load<T>(pa, n), b = load<T>(pb, n), r(n > 0 ? n : 1);
    if (!std::strcmp(op, "sort")) return sort(n, a, out);
    if (!std::strcmp(op, "search_right")) return search(n, a, b, out);
    for (long long i = 0; i < n; ++i) {
        const T u = a[i], v = b[i];
        if (!std::strcmp(op, "remainder")) r[i] = tg_iremainder(u, v);
        else if (!std::strcmp(op, "floor_divide")) r[i] = tg_ifloor_divide(u, v);
        else if (!std::strcmp(op, "fmod")) r[i] = tg_ifmod(u, v);
        else if (!std::strcmp(op, "reciprocal")) r[i] = tg_ireciprocal(u);
        else return 4;
    }
    save(out, r, n);
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 7) return 1;
    const char *op = argv[1], *type = argv[2];
    const long long n = std::atoll(argv[3]);
    if (!std::strcmp(type, "f32")) return run_float<float>(op, n, argv[4], argv[5], argv[6]);
    if (!std::strcmp(type, "f64")) return run_float<double>(op, n, argv[4], argv[5], argv[6]);
    if (!std::strcmp(type, "i32")) return run_int<int>(op, n, argv[4], argv[5], argv[6]);
    if (!std::strcmp(type, "i64")) return run_int<long long>(op, n, argv[4], argv[5], argv[6]);
    return 1;
}
