// The contraction path rule and its settings (path.h).
#include "ops/sphere/legendre/path.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "engine/error.h"
#include "ops/composite_path.h"

namespace gs::sphere {
namespace {

DeviceSphereForm form_from_environment() {
  const char* v = std::getenv("GS_DEVICE_SPHERE");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "gemm") == 0) return DeviceSphereForm::gemm;
  GS_CHECK(std::strcmp(v, "kernels") == 0, "GS_DEVICE_SPHERE: expected gemm or kernels, got '{}'", v);
  return DeviceSphereForm::kernels;
}

std::atomic<int>& form_setting() {  // -1: not read from the environment yet
  static std::atomic<int> f{-1};
  return f;
}

std::atomic<LegendrePath> g_legendre_path{LegendrePath::automatic};

ContractionPath device_path() {
  return device_sphere_form() == DeviceSphereForm::kernels ? ContractionPath::device_kernels
                                                           : ContractionPath::device_gemm;
}

}  // namespace

const char* contraction_path_name(ContractionPath path) {
  switch (path) {
    case ContractionPath::cpu_table: return "cpu_table";
    case ContractionPath::cpu_recurrence: return "cpu_recurrence";
    case ContractionPath::device_gemm: return "device_gemm";
    case ContractionPath::device_kernels: return "device_kernels";
  }
  return "unknown";
}

ContractionPath legendre_contraction_path(const Tensor& x, const LegendreTableKey& key, int64_t batch, bool vector) {
  if (composite_path(x)) return device_path();
  return !vector && use_recurrence(key, batch) ? ContractionPath::cpu_recurrence : ContractionPath::cpu_table;
}

ContractionPath spectral_contraction_path(const Tensor& x) {
  return composite_path(x) ? device_path() : ContractionPath::cpu_table;
}

DeviceSphereForm set_device_sphere_form(DeviceSphereForm form) {
  const DeviceSphereForm previous = device_sphere_form();
  form_setting().store(static_cast<int>(form));
  return previous;
}

DeviceSphereForm device_sphere_form() {
  int f = form_setting().load();
  if (f < 0) {
    f = static_cast<int>(form_from_environment());
    form_setting().store(f);
  }
  return static_cast<DeviceSphereForm>(f);
}

const char* device_sphere_form_name(DeviceSphereForm form) {
  return form == DeviceSphereForm::kernels ? "kernels" : "gemm";
}

LegendrePath set_legendre_path(LegendrePath path) { return g_legendre_path.exchange(path); }
LegendrePath legendre_path() { return g_legendre_path.load(); }

bool use_recurrence(const LegendreTableKey& key, int64_t batch) {
  // The recurrence kernels run over every order; a slice of them (a process's block of m in the
  // distributed SHT) always takes its sliced table.
  if (!key.all_orders()) return false;
  switch (legendre_path()) {
    case LegendrePath::table: return false;
    case LegendrePath::recurrence: return true;
    case LegendrePath::automatic: break;
  }
  // The measured rule (NOTES.md, "On-the-fly path"). Per field, both paths do work proportional
  // to the table's entries, but the table kernels also stream the whole table once per call,
  // shared by the batch; past the caches that traffic decides. The recurrence stays in f64 while
  // the f32 table kernels run at twice the f64 rate, so f32 tables pay off down to larger shares,
  // the f32 analysis table (the faster of the two table kernels) to larger still: at
  // legendre-gauss 360x720, 4 fields (10 MB a field) it took 0.70-0.75x the recurrence's time at 1
  // and 2 threads, the synthesis table 1.26-1.31x (ops/BENCHMARKS.md, issue 33).
  const double mb = 1e-6 * static_cast<double>(LegendreTable::estimated_bytes(key));
  const double per_field = mb / static_cast<double>(std::max<int64_t>(batch, 1));
  if (key.dtype == DType::f32) return per_field >= (key.kind == LegendreTableKind::analysis ? 16.0 : 8.0);
  return per_field >= 2.0 || (mb >= 16.0 && per_field >= 0.25);
}

}  // namespace gs::sphere
