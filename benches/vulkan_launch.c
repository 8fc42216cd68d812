/* Per-launch cost of a tiny Vulkan kernel: through tvmrt against a minimal hand-written Vulkan
 * program (the floor), in the same run, on the same driver and the same SPIR-V.
 *
 *   tvmrt, host launcher   TVMFFIFunctionCall of `add_scale` in tests/fixtures/vulkan/
 *                          add_scale.so (the host code TVM 0.27 generated for target vulkan:
 *                          argument checks, __tvm_set_device, the kernel looked up once, then
 *                          tvmrt's Vulkan launch), on device arrays from TVMArrayAlloc
 *   tvmrt, kernel directly TVMFFIFunctionCall of the `vulkan` module's `add_scale_kernel` with
 *                          the buffers, scalars and launch extents (tvmrt's launch path alone)
 *   floor                  vkCmdBindPipeline + vkCmdPushDescriptorSetWithTemplateKHR (3
 *                          buffers, through a descriptor update template, as tvmrt pushes) +
 *                          vkCmdPushConstants + vkCmdDispatch + a barrier, recorded into one
 *                          command buffer, on a pipeline this program built from the same SPIR-V
 *
 * Each loop records N launches and then submits and waits once (vkQueueSubmit + fence /
 * TVMSynchronize), so a launch's cost includes the device running it, alike for all three. The
 * loops alternate for ROUNDS rounds; the figures are the median (and best) ns per launch.
 *
 * Usage: vulkan_launch ADD_SCALE_SO SPIRV [N [ROUNDS]] */
#define _POSIX_C_SOURCE 200809L
#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <vulkan/vulkan.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ffi.h"
#include "bench_timing.h"

#define CHECK_TVM(call)                                             \
  do {                                                              \
    if ((call) != 0) {                                              \
      fprintf(stderr, "%s failed: %s\n", #call, TVMGetLastError()); \
      exit(1);                                                      \
    }                                                               \
  } while (0)
#define CHECK_VK(call)                                   \
  do {                                                   \
    VkResult rc_ = (call);                               \
    if (rc_ != VK_SUCCESS) {                             \
      fprintf(stderr, "%s failed: %d\n", #call, rc_);    \
      exit(1);                                           \
    }                                                    \
  } while (0)

enum { ELEMENTS = 256, THREADS = 64 };

/* The hand-written program's state. */
typedef struct {
  VkInstance instance;
  VkDevice device;
  VkQueue queue;
  VkCommandPool pool;
  VkCommandBuffer cmd;
  VkFence fence;
  VkPipeline pipeline;
  VkPipelineLayout layout;
  VkDescriptorBufferInfo bufs[3];
  PFN_vkCmdPushDescriptorSetWithTemplateKHR push;
  VkDescriptorUpdateTemplate tmpl;
  struct {
    float alpha;
    int32_t pad0;
    int32_t n;
    int32_t pad1;
  } scalars;
} Floor;

static uint32_t find_memory(VkPhysicalDevice pd, uint32_t bits, VkMemoryPropertyFlags want) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
    if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
  }
  fprintf(stderr, "no memory type\n");
  exit(1);
}

/* Instance, the physical device named `name` (tvmrt's vulkan:0), a device with push
 * descriptors, 3 buffers, the pipeline. */
static void floor_init(Floor* f, const char* name, const uint32_t* code, size_t code_size) {
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  CHECK_VK(vkCreateInstance(&ici, NULL, &f->instance));
  uint32_t n = 16;
  VkPhysicalDevice pds[16], pd = VK_NULL_HANDLE;
  CHECK_VK(vkEnumeratePhysicalDevices(f->instance, &n, pds));
  for (uint32_t i = 0; i < n; i++) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pds[i], &p);
    if (strcmp(p.deviceName, name) == 0) pd = pds[i];
  }
  if (pd == VK_NULL_HANDLE) {
    fprintf(stderr, "no device named %s\n", name);
    exit(1);
  }
  uint32_t nq = 16;
  VkQueueFamilyProperties qf[16];
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
  uint32_t family = 0;
  while (family < nq && !(qf[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) family++;
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  const char* ext = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
  VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = 1;
  dci.ppEnabledExtensionNames = &ext;
  CHECK_VK(vkCreateDevice(pd, &dci, NULL, &f->device));
  vkGetDeviceQueue(f->device, family, 0, &f->queue);
  f->push = (PFN_vkCmdPushDescriptorSetWithTemplateKHR)vkGetDeviceProcAddr(
      f->device, "vkCmdPushDescriptorSetWithTemplateKHR");
  for (int i = 0; i < 3; i++) {
    VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = ELEMENTS * sizeof(float);
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    VkBuffer buf;
    CHECK_VK(vkCreateBuffer(f->device, &bci, NULL, &buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(f->device, buf, &req);
    VkMemoryAllocateInfo mai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = find_memory(pd, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    VkDeviceMemory mem;
    CHECK_VK(vkAllocateMemory(f->device, &mai, NULL, &mem));
    CHECK_VK(vkBindBufferMemory(f->device, buf, mem, 0));
    f->bufs[i].buffer = buf;
    f->bufs[i].offset = 0;
    f->bufs[i].range = VK_WHOLE_SIZE;
  }
  VkShaderModuleCreateInfo smci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  smci.codeSize = code_size;
  smci.pCode = code;
  VkShaderModule shader;
  CHECK_VK(vkCreateShaderModule(f->device, &smci, NULL, &shader));
  VkDescriptorSetLayoutBinding b[3];
  for (int i = 0; i < 3; i++) {
    memset(&b[i], 0, sizeof(b[i]));
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dsl = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dsl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  dsl.bindingCount = 3;
  dsl.pBindings = b;
  VkDescriptorSetLayout set_layout;
  CHECK_VK(vkCreateDescriptorSetLayout(f->device, &dsl, NULL, &set_layout));
  VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(f->scalars)};
  VkPipelineLayoutCreateInfo plci = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &set_layout;
  plci.pushConstantRangeCount = 1;
  plci.pPushConstantRanges = &range;
  CHECK_VK(vkCreatePipelineLayout(f->device, &plci, NULL, &f->layout));
  VkDescriptorUpdateTemplateEntry te[3];
  for (int i = 0; i < 3; i++) {
    te[i].dstBinding = i;
    te[i].dstArrayElement = 0;
    te[i].descriptorCount = 1;
    te[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    te[i].offset = i * sizeof(VkDescriptorBufferInfo);
    te[i].stride = sizeof(VkDescriptorBufferInfo);
  }
  VkDescriptorUpdateTemplateCreateInfo tci = {
      VK_STRUCTURE_TYPE_DESCRIPTOR_UPDATE_TEMPLATE_CREATE_INFO};
  tci.descriptorUpdateEntryCount = 3;
  tci.pDescriptorUpdateEntries = te;
  tci.templateType = VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS_KHR;
  tci.descriptorSetLayout = set_layout;
  tci.pipelineBindPoint = VK_PIPELINE_BIND_POINT_COMPUTE;
  tci.pipelineLayout = f->layout;
  tci.set = 0;
  CHECK_VK(vkCreateDescriptorUpdateTemplate(f->device, &tci, NULL, &f->tmpl));
  VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpci.stage.module = shader;
  cpci.stage.pName = "add_scale_kernel";
  cpci.layout = f->layout;
  CHECK_VK(vkCreateComputePipelines(f->device, VK_NULL_HANDLE, 1, &cpci, NULL, &f->pipeline));
  VkCommandPoolCreateInfo cpi = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  cpi.queueFamilyIndex = family;
  CHECK_VK(vkCreateCommandPool(f->device, &cpi, NULL, &f->pool));
  VkCommandBufferAllocateInfo cbai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cbai.commandPool = f->pool;
  cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cbai.commandBufferCount = 1;
  CHECK_VK(vkAllocateCommandBuffers(f->device, &cbai, &f->cmd));
  VkFenceCreateInfo fci = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  CHECK_VK(vkCreateFence(f->device, &fci, NULL, &f->fence));
  f->scalars.alpha = 0.5f;
  f->scalars.n = ELEMENTS;
}

/* When the last loop finished recording (before its submission). */
static uint64_t recorded_at;

/* Records `count` launches and submits them, waiting for the fence. */
__attribute__((noinline)) static void loop_floor(Floor* f, int count) {
  VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  CHECK_VK(vkBeginCommandBuffer(f->cmd, &bi));
  VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  for (int i = 0; i < count; i++) {
    vkCmdBindPipeline(f->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, f->pipeline);
    f->push(f->cmd, f->tmpl, f->layout, 0, f->bufs);
    vkCmdPushConstants(f->cmd, f->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(f->scalars),
                       &f->scalars);
    vkCmdDispatch(f->cmd, ELEMENTS / THREADS, 1, 1);
    vkCmdPipelineBarrier(f->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                         1, &mb, 0, NULL, 0, NULL);
  }
  CHECK_VK(vkEndCommandBuffer(f->cmd));
  recorded_at = now_ns();
  VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &f->cmd;
  CHECK_VK(vkQueueSubmit(f->queue, 1, &si, f->fence));
  CHECK_VK(vkWaitForFences(f->device, 1, &f->fence, VK_TRUE, UINT64_MAX));
  CHECK_VK(vkResetFences(f->device, 1, &f->fence));
  CHECK_VK(vkResetCommandPool(f->device, f->pool, 0));
}

__attribute__((noinline)) static void loop_tvmrt(TVMFFIObjectHandle fn, TVMFFIAny* args,
                                                 int nargs, int count) {
  for (int i = 0; i < count; i++) {
    TVMFFIAny out;
    out.type_index = kTVMFFINone;
    if (TVMFFIFunctionCall(fn, args, nargs, &out) != 0) {
      fprintf(stderr, "launch failed: %s\n", TVMGetLastError());
      exit(1);
    }
  }
  recorded_at = now_ns();
  CHECK_TVM(TVMSynchronize(kDLVulkan, 0, NULL));
}

/* The two tvmrt loops under their own names, so that callgrind can count each
 * (--toggle-collect=loop_host / loop_direct). */
__attribute__((noinline)) static void loop_host(TVMFFIObjectHandle fn, TVMFFIAny* args,
                                                int count) {
  loop_tvmrt(fn, args, 4, count);
}
__attribute__((noinline)) static void loop_direct(TVMFFIObjectHandle fn, TVMFFIAny* args,
                                                  int count) {
  loop_tvmrt(fn, args, 7, count);
}

static uint32_t* read_file(const char* path, size_t* size) {
  FILE* fp = fopen(path, "rb");
  if (!fp) {
    perror(path);
    exit(1);
  }
  fseek(fp, 0, SEEK_END);
  *size = (size_t)ftell(fp);
  fseek(fp, 0, SEEK_SET);
  uint32_t* buf = malloc(*size);
  if (fread(buf, 1, *size, fp) != *size) exit(1);
  fclose(fp);
  return buf;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ADD_SCALE_SO SPIRV [N [ROUNDS<=64]]\n", argv[0]);
    return 2;
  }
  int n_launch = argc > 3 ? atoi(argv[3]) : 10000;
  int rounds = argc > 4 ? atoi(argv[4]) : 9;
  if (rounds < 1 || rounds > 64 || n_launch < 1) return 2;
  double floor_ns[64], host_ns[64], direct_ns[64];
  double floor_rec[64], host_rec[64], direct_rec[64];

  /* tvmrt: the library, its host launcher, its kernel, device arrays. */
  TVMModuleHandle lib = NULL;
  CHECK_TVM(TVMModLoadFromFile(argv[1], "so", &lib));
  TVMFunctionHandle host = NULL;
  CHECK_TVM(TVMModGetFunction(lib, "add_scale", 0, &host));
  TVMFFIObjectHandle get_import = global("runtime.ModuleGetImport");
  TVMFFIObjectHandle get_function = global("ffi.ModuleGetFunction");
  TVMFFIAny ia[2] = {any_obj(lib), any_int(0)};
  TVMFFIAny dev_mod = call(get_import, ia, 2);
  TVMFFIAny name;
  memset(&name, 0, sizeof(name));
  name.type_index = kTVMFFIRawStr;
  name.v_c_str = "add_scale_kernel";
  TVMFFIAny ga[3] = {dev_mod, name, any_int(0)};
  ga[2].type_index = kTVMFFIBool;
  TVMFFIAny kernel = call(get_function, ga, 3);
  int64_t shape[1] = {ELEMENTS};
  DLTensor* t[3];
  for (int i = 0; i < 3; i++) CHECK_TVM(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLVulkan, 0, &t[i]));
  TVMFFIAny hargs[4] = {any_dltensor(t[0]), any_dltensor(t[1]), any_float(0.5),
                        any_dltensor(t[2])};
  TVMFFIAny kargs[7] = {any_ptr(t[0]->data), any_ptr(t[1]->data), any_ptr(t[2]->data),
                        any_float(0.5),      any_int(ELEMENTS),   any_int(ELEMENTS / THREADS),
                        any_int(THREADS)};

  /* The floor on the same device. */
  TVMFFIObjectHandle attr = global("runtime.GetDeviceAttr");
  TVMFFIAny aa[3] = {any_int(kDLVulkan), any_int(0), any_int(5)};
  TVMFFIAny dev_name = call(attr, aa, 3);
  char name_buf[256] = {0};
  if (dev_name.type_index == kTVMFFISmallStr) {
    memcpy(name_buf, dev_name.v_bytes, dev_name.small_str_len);
  } else {
    const TVMFFIByteArray* s = (const TVMFFIByteArray*)((char*)dev_name.v_obj + sizeof(TVMFFIObject));
    memcpy(name_buf, s->data, s->size < 255 ? s->size : 255);
  }
  size_t code_size;
  uint32_t* code = read_file(argv[2], &code_size);
  Floor f;
  memset(&f, 0, sizeof(f));
  floor_init(&f, name_buf, code, code_size);

  /* Warm-up: pipelines built, arenas allocated. */
  loop_floor(&f, 100);
  loop_tvmrt(host, hargs, 4, 100);
  loop_tvmrt(kernel.v_obj, kargs, 7, 100);
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < 3; k++) {
      int which = (r + k) % 3;
      uint64_t t0 = now_ns();
      if (which == 0) loop_floor(&f, n_launch);
      if (which == 1) loop_host(host, hargs, n_launch);
      if (which == 2) loop_direct(kernel.v_obj, kargs, n_launch);
      double ns = (double)(now_ns() - t0) / n_launch;
      double rec = (double)(recorded_at - t0) / n_launch;
      (which == 0 ? floor_ns : which == 1 ? host_ns : direct_ns)[r] = ns;
      (which == 0 ? floor_rec : which == 1 ? host_rec : direct_rec)[r] = rec;
    }
  }
  double fm, fb, hm, hb, dm, db;
  median_min(floor_ns, rounds, &fm, &fb);
  median_min(host_ns, rounds, &hm, &hb);
  median_min(direct_ns, rounds, &dm, &db);
  double frm, frb, hrm, hrb, drm, drb;
  median_min(floor_rec, rounds, &frm, &frb);
  median_min(host_rec, rounds, &hrm, &hrb);
  median_min(direct_rec, rounds, &drm, &drb);
  printf("device: %s; %d launches per round, %d rounds; ns per launch, median (best)\n",
         name_buf, n_launch, rounds);
  printf("%-34s %21s %22s\n", "", "recorded, run, waited", "recording only");
  printf("%-34s %9.1f (%9.1f) %5.2fx %9.1f (%8.1f) %5.2fx\n", "floor: hand-written Vulkan", fm,
         fb, 1.0, frm, frb, 1.0);
  printf("%-34s %9.1f (%9.1f) %5.2fx %9.1f (%8.1f) %5.2fx\n", "tvmrt: kernel function directly",
         dm, db, dm / fm, drm, drb, drm / frm);
  printf("%-34s %9.1f (%9.1f) %5.2fx %9.1f (%8.1f) %5.2fx\n", "tvmrt: TVM's host launcher", hm,
         hb, hm / fm, hrm, hrb, hrm / frm);
  return 0;
}
