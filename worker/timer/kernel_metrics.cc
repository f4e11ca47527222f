#include "worker/timer/kernel_metrics.h"

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/loader/sibling_library.h"
#include "common/status/status_macros.h"
#include "worker/timer/cupti_status.h"

namespace forge::timer {
namespace {

// Bytes read from and written to DRAM, and active warps per SM as a percentage of the SM's
// maximum while it is active (achieved occupancy).
const char* kMetricNames[] = {"dram__bytes.sum",
                              "sm__warps_active.avg.pct_of_peak_sustained_active"};
constexpr size_t kMetricCount = sizeof(kMetricNames) / sizeof(kMetricNames[0]);
// Two metrics take one or two passes; this bounds a profiler that never reports completion.
constexpr int kMaxPasses = 32;
constexpr char kRangeName[] = "forge_launch";

// A parameter struct of CUPTI's profiler API: zeroed, with its size set, as CUPTI expects.
template <typename Params>
Params ProfilerParams(size_t struct_size) {
  Params params{};
  params.structSize = struct_size;
  return params;
}
#define FORGE_CUPTI_PARAMS(type) ProfilerParams<type>(type##_STRUCT_SIZE)

// The metrics' configuration for one chip, built by CUPTI's host library.
class MetricConfig {
 public:
  // `counter_availability` (from the device, or empty without one) lets CUPTI leave out counters
  // the device does not expose.
  static absl::StatusOr<MetricConfig> Create(absl::string_view chip,
                                             const std::vector<uint8_t>& counter_availability) {
    const std::string chip_name(chip);
    auto init = FORGE_CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    init.pChipName = chip_name.c_str();
    init.pCounterAvailabilityImage =
        counter_availability.empty() ? nullptr : counter_availability.data();
    // CUPTI opens its profiler host library by name (see common/loader/sibling_library.h).
    LoadSiblingLibrary(reinterpret_cast<const void*>(&cuptiGetVersion), "libnvperf_host.so");
    FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiProfilerHostInitialize(&init),
                                         absl::StrCat("cuptiProfilerHostInitialize(", chip, ")")));
    MetricConfig config(init.pHostObject);

    auto add = FORGE_CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = config.host_.get();
    add.ppMetricNames = kMetricNames;
    add.numMetrics = kMetricCount;
    FORGE_RETURN_IF_ERROR(
        CuptiStatus(cuptiProfilerHostConfigAddMetrics(&add),
                       absl::StrCat("cuptiProfilerHostConfigAddMetrics(", kMetricNames[0], ", ",
                                    kMetricNames[1], ") for chip ", chip)));
    auto size = FORGE_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    size.pHostObject = config.host_.get();
    FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiProfilerHostGetConfigImageSize(&size),
                                         "cuptiProfilerHostGetConfigImageSize"));
    config.image_.resize(size.configImageSize);
    auto image = FORGE_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    image.pHostObject = config.host_.get();
    image.configImageSize = config.image_.size();
    image.pConfigImage = config.image_.data();
    FORGE_RETURN_IF_ERROR(
        CuptiStatus(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage"));
    return config;
  }

  const std::vector<uint8_t>& image() const { return image_; }

  absl::StatusOr<int64_t> Passes() {
    auto passes = FORGE_CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
    passes.configImageSize = image_.size();
    passes.pConfigImage = image_.data();
    FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiProfilerHostGetNumOfPasses(&passes),
                                         "cuptiProfilerHostGetNumOfPasses"));
    return static_cast<int64_t>(passes.numOfPasses);
  }

  // The metrics' values in the first range of a decoded counter data image, in kMetricNames order.
  absl::StatusOr<std::vector<double>> Evaluate(std::vector<uint8_t>& counter_data) {
    std::vector<double> values(kMetricCount);
    auto evaluate = FORGE_CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    evaluate.pHostObject = host_.get();
    evaluate.pCounterDataImage = counter_data.data();
    evaluate.counterDataImageSize = counter_data.size();
    evaluate.rangeIndex = 0;
    evaluate.ppMetricNames = kMetricNames;
    evaluate.numMetrics = kMetricCount;
    evaluate.pMetricValues = values.data();
    FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiProfilerHostEvaluateToGpuValues(&evaluate),
                                         "cuptiProfilerHostEvaluateToGpuValues"));
    return values;
  }

 private:
  struct HostObjectDeleter {
    void operator()(CUpti_Profiler_Host_Object* host) const {
      auto params = FORGE_CUPTI_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
      params.pHostObject = host;
      cuptiProfilerHostDeinitialize(&params);
    }
  };

  explicit MetricConfig(CUpti_Profiler_Host_Object* host) : host_(host) {}

  std::unique_ptr<CUpti_Profiler_Host_Object, HostObjectDeleter> host_;
  std::vector<uint8_t> image_;
};

// The CUcontext that gpu::Device made current. The driver is already loaded by gpu::Device (with
// dlopen, so it cannot be linked here either); RTLD_NOLOAD only looks it up.
absl::StatusOr<CUcontext> CurrentContext(const gpu::Device& device) {
  FORGE_RETURN_IF_ERROR(device.MakeCurrent());
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver == nullptr) return absl::UnavailableError("libcuda.so.1 is not loaded");
  absl::Cleanup close_driver = [driver] { dlclose(driver); };
  using GetCurrentFn = CUresult (*)(CUcontext*);
  auto get_current = reinterpret_cast<GetCurrentFn>(dlsym(driver, "cuCtxGetCurrent"));
  if (get_current == nullptr) return absl::UnavailableError("libcuda.so.1 has no cuCtxGetCurrent");
  CUcontext context = nullptr;
  FORGE_RETURN_IF_ERROR(gpu::CudaStatus(get_current(&context), "cuCtxGetCurrent"));
  return context;
}

absl::StatusOr<std::vector<uint8_t>> CounterAvailability(CUcontext context) {
  auto params = FORGE_CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
  params.ctx = context;
  FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiProfilerGetCounterAvailability(&params),
                                       "cuptiProfilerGetCounterAvailability (size)"));
  std::vector<uint8_t> image(params.counterAvailabilityImageSize);
  params.pCounterAvailabilityImage = image.data();
  FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiProfilerGetCounterAvailability(&params),
                                       "cuptiProfilerGetCounterAvailability"));
  return image;
}

// Errors of the launch (and of the flush around it) are the caller's, not the profiler's: they
// go to `launch_status`, while the returned status says why the counters could not be read.
absl::StatusOr<std::vector<double>> Profile(const gpu::Device& device, gpu::Stream& stream,
                                            const LaunchFn& launch, absl::Status& launch_status) {
  FORGE_RETURN_IF_ERROR(Annotate(gpu::DriverStatus(), "the profiler needs a GPU"));
  // Allocated before profiling starts, so that a failing allocation is the caller's error.
  const int64_t flush_bytes = (2 * device.properties().l2_cache_bytes + 3) / 4 * 4;
  absl::StatusOr<gpu::DeviceBuffer> flush_buffer =
      device.Allocate(static_cast<size_t>(std::max<int64_t>(flush_bytes, 4)));
  if (!flush_buffer.ok()) {
    launch_status = flush_buffer.status();
    return launch_status;
  }
  FORGE_ASSIGN_OR_RETURN(CUcontext context, CurrentContext(device));

  auto initialize = FORGE_CUPTI_PARAMS(CUpti_Profiler_Initialize_Params);
  LoadSiblingLibrary(reinterpret_cast<const void*>(&cuptiGetVersion), "libnvperf_target.so");
  FORGE_RETURN_IF_ERROR(
      CuptiStatus(cuptiProfilerInitialize(&initialize), "cuptiProfilerInitialize"));
  absl::Cleanup deinitialize = [] {
    auto params = FORGE_CUPTI_PARAMS(CUpti_Profiler_DeInitialize_Params);
    cuptiProfilerDeInitialize(&params);
  };
  auto chip = FORGE_CUPTI_PARAMS(CUpti_Device_GetChipName_Params);
  chip.deviceIndex = static_cast<size_t>(device.properties().ordinal);
  FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName"));

  auto enable = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params);
  enable.ctx = context;
  FORGE_RETURN_IF_ERROR(
      CuptiStatus(cuptiRangeProfilerEnable(&enable), "cuptiRangeProfilerEnable"));
  CUpti_RangeProfiler_Object* profiler = enable.pRangeProfilerObject;
  absl::Cleanup disable = [profiler] {
    auto params = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params);
    params.pRangeProfilerObject = profiler;
    cuptiRangeProfilerDisable(&params);
  };

  FORGE_ASSIGN_OR_RETURN(std::vector<uint8_t> availability, CounterAvailability(context));
  FORGE_ASSIGN_OR_RETURN(MetricConfig config, MetricConfig::Create(chip.pChipName, availability));

  auto data_size = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
  data_size.pRangeProfilerObject = profiler;
  data_size.pMetricNames = kMetricNames;
  data_size.numMetrics = kMetricCount;
  data_size.maxNumOfRanges = 1;
  data_size.maxNumRangeTreeNodes = 1;
  FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiRangeProfilerGetCounterDataSize(&data_size),
                                       "cuptiRangeProfilerGetCounterDataSize"));
  std::vector<uint8_t> counter_data(data_size.counterDataSize);
  auto data_init = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
  data_init.pRangeProfilerObject = profiler;
  data_init.counterDataSize = counter_data.size();
  data_init.pCounterData = counter_data.data();
  FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiRangeProfilerCounterDataImageInitialize(&data_init),
                                       "cuptiRangeProfilerCounterDataImageInitialize"));

  // One user range around the whole launch, however many kernels it runs; we replay it.
  auto set_config = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
  set_config.pRangeProfilerObject = profiler;
  set_config.configSize = config.image().size();
  set_config.pConfig = config.image().data();
  set_config.counterDataImageSize = counter_data.size();
  set_config.pCounterDataImage = counter_data.data();
  set_config.range = CUPTI_UserRange;
  set_config.replayMode = CUPTI_UserReplay;
  set_config.maxRangesPerPass = 1;
  set_config.numNestingLevels = 1;
  set_config.minNestingLevel = 1;
  set_config.passIndex = 0;
  set_config.targetNestingLevel = 1;
  FORGE_RETURN_IF_ERROR(
      CuptiStatus(cuptiRangeProfilerSetConfig(&set_config), "cuptiRangeProfilerSetConfig"));

  bool all_passes_submitted = false;
  for (int pass = 0; pass < kMaxPasses && !all_passes_submitted; ++pass) {
    launch_status = flush_buffer->Fill32(0, stream);
    if (launch_status.ok()) launch_status = stream.Synchronize();
    if (!launch_status.ok()) {
      launch_status = Annotate(launch_status, "flushing L2 before a profiler pass");
      return launch_status;
    }

    auto start = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params);
    start.pRangeProfilerObject = profiler;
    FORGE_RETURN_IF_ERROR(
        CuptiStatus(cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart"));
    auto push = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_PushRange_Params);
    push.pRangeProfilerObject = profiler;
    push.pRangeName = kRangeName;
    FORGE_RETURN_IF_ERROR(
        CuptiStatus(cuptiRangeProfilerPushRange(&push), "cuptiRangeProfilerPushRange"));
    launch_status = launch(stream);
    if (launch_status.ok()) launch_status = stream.Synchronize();
    if (!launch_status.ok()) {
      launch_status = Annotate(launch_status, absl::StrCat("launch in profiler pass ", pass));
      return launch_status;
    }
    auto pop = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_PopRange_Params);
    pop.pRangeProfilerObject = profiler;
    FORGE_RETURN_IF_ERROR(
        CuptiStatus(cuptiRangeProfilerPopRange(&pop), "cuptiRangeProfilerPopRange"));
    auto stop = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
    stop.pRangeProfilerObject = profiler;
    FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop"));
    all_passes_submitted = stop.isAllPassSubmitted != 0;
  }
  if (!all_passes_submitted) {
    return absl::UnavailableError(
        absl::StrCat("the range profiler wanted more than ", kMaxPasses, " passes"));
  }

  auto decode = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
  decode.pRangeProfilerObject = profiler;
  FORGE_RETURN_IF_ERROR(
      CuptiStatus(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData"));
  auto info = FORGE_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
  info.pCounterDataImage = counter_data.data();
  info.counterDataImageSize = counter_data.size();
  FORGE_RETURN_IF_ERROR(CuptiStatus(cuptiRangeProfilerGetCounterDataInfo(&info),
                                       "cuptiRangeProfilerGetCounterDataInfo"));
  if (decode.numOfRangeDropped != 0 || info.numTotalRanges != 1) {
    return absl::UnavailableError(absl::StrCat("the range profiler kept ", info.numTotalRanges,
                                               " ranges and dropped ", decode.numOfRangeDropped,
                                               "; expected the launch's one range"));
  }
  return config.Evaluate(counter_data);
}

}  // namespace

absl::StatusOr<CounterReading> ReadKernelCounters(const gpu::Device& device, gpu::Stream& stream,
                                                  const LaunchFn& launch) {
  absl::Status launch_status;
  absl::StatusOr<std::vector<double>> values = Profile(device, stream, launch, launch_status);
  if (!launch_status.ok()) return launch_status;
  CounterReading reading;
  if (!values.ok()) {
    reading.counters_status =
        absl::UnavailableError(absl::StrCat("counters unavailable: ", values.status().message()));
    return reading;
  }
  reading.metrics.set_counters_available(true);
  reading.metrics.set_dram_bytes(std::llround((*values)[0]));
  reading.metrics.set_achieved_occupancy((*values)[1] / 100.0);
  return reading;
}

absl::StatusOr<int64_t> CounterPassesForChip(absl::string_view chip) {
  FORGE_ASSIGN_OR_RETURN(MetricConfig config, MetricConfig::Create(chip, {}));
  return config.Passes();
}

}  // namespace forge::timer
