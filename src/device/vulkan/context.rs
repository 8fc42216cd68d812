//! The Vulkan instance and devices tvmrt runs on, found once per process (TVM's
//! `VulkanInstance` and `VulkanDevice`, `src/runtime/vulkan/vulkan_instance.cc`,
//! `vulkan_device.cc`): `libvulkan.so.1` (or the file `TVMRT_VULKAN_LIBRARY` names) opened at
//! run time through ash's loader, one instance, and one logical device with one compute queue
//! per physical device that has one. GPUs come first (discrete, then integrated, then virtual),
//! then the rest (lavapipe's CPU device); device ids count in that order.
//!
//! As in TVM: `TVM_VULKAN_ENABLE_VALIDATION_LAYERS=1` turns the Khronos validation layer on
//! (its messages are logged and counted, see [`validation_errors`]), and
//! `TVM_VULKAN_DISABLE_PUSH_DESCRIPTOR=1` makes kernels bind descriptor sets even where the
//! device has `VK_KHR_push_descriptor`.

use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

use ash::vk;
use parking_lot::Mutex;

use super::stream::Stream;
use crate::device::loaded::{device_by_id, Devices, LoadedDriver};
use crate::error::{Error, Result};

/// The Khronos validation layer.
const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// One Vulkan device and what tvmrt keeps of it.
pub struct Device {
    /// The physical device.
    pub physical: vk::PhysicalDevice,
    /// The logical device.
    pub device: ash::Device,
    /// Its compute queue.
    pub queue: vk::Queue,
    /// The queue's family.
    pub family: u32,
    /// `VK_KHR_push_descriptor`'s functions, when kernels push their descriptors.
    pub push: Option<ash::khr::push_descriptor::Device>,
    /// Its properties (name, limits, versions).
    pub props: vk::PhysicalDeviceProperties,
    /// Its memory types and heaps.
    pub memory: vk::PhysicalDeviceMemoryProperties,
    /// The shader features enabled on it (float64, int64, int16 where the device has them).
    pub features: vk::PhysicalDeviceFeatures,
    /// The name, as a string.
    pub name: String,
    /// The device's one stream (command recording and submission).
    pub stream: Mutex<Stream>,
}

impl Device {
    /// Whether kernels push their descriptors (TVM's immediate path).
    pub fn use_push_descriptors(&self) -> bool {
        self.push.is_some()
    }

    /// A memory type allowed by `bits` with `want`, else (when `fallback`) any allowed one.
    pub fn memory_type(
        &self,
        bits: u32,
        want: vk::MemoryPropertyFlags,
        fallback: bool,
    ) -> Option<u32> {
        let types = &self.memory.memory_types[..self.memory.memory_type_count as usize];
        let allowed = |i: usize| bits & (1 << i) != 0;
        types
            .iter()
            .enumerate()
            .position(|(i, t)| allowed(i) && t.property_flags.contains(want))
            .or_else(|| {
                fallback
                    .then(|| (0..types.len()).find(|&i| allowed(i)))
                    .flatten()
            })
            .map(|i| i as u32)
    }
}

/// The instance and every device tvmrt uses, in device-id order.
pub struct Context {
    /// The loader's entry points (keeps `libvulkan.so.1` open).
    pub entry: ash::Entry,
    /// The instance.
    pub instance: ash::Instance,
    /// The validation layer's messenger, when on.
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// The devices.
    pub devices: Vec<Device>,
}

// SAFETY: Vulkan handles may be used from any thread; the calls Vulkan requires to be
// externally synchronized (queue submission, command buffer recording, pool resets) go through
// each device's `stream` mutex.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

/// The instance and its devices, made on first use.
static CONTEXT: LoadedDriver<Context> = LoadedDriver::new();

/// Messages of severity error the validation layer reported.
static VALIDATION_ERRORS: AtomicUsize = AtomicUsize::new(0);

/// The validation layer's error messages so far (the first 32).
static VALIDATION_MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The instance and devices, made on first use; the same error every time when there are none
/// (no `libvulkan.so.1`, no driver, no device).
pub fn context() -> Result<&'static Context> {
    CONTEXT.get_or_load(create)
}

/// The context if it has been made already, without making it.
pub fn existing() -> Option<&'static Context> {
    CONTEXT.get()
}

/// The number of devices when they have been found already, without looking for them.
pub fn known_device_count() -> Option<usize> {
    CONTEXT.known_device_count()
}

impl Devices for Context {
    type Device = Device;

    fn devices(&self) -> &[Device] {
        &self.devices
    }
}

/// How many errors the validation layer has reported (0 when it is off), and their first
/// messages.
pub fn validation_errors() -> (usize, Vec<String>) {
    (
        VALIDATION_ERRORS.load(Ordering::Acquire),
        VALIDATION_MESSAGES.lock().clone(),
    )
}

impl Context {
    /// Whether the validation layer is on and reporting to tvmrt.
    pub fn validating(&self) -> bool {
        self.debug.is_some()
    }

    /// Device `id`, or an error naming how many there are.
    pub fn device(&self, id: i32) -> Result<&Device> {
        device_by_id(&self.devices, id, super::DEVICE_TYPE, "Vulkan")
    }
}

/// A Vulkan call's failure as an error naming the call.
pub fn vk_error(r: vk::Result, call: &str) -> Error {
    let kind = if r == vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
        || r == vk::Result::ERROR_OUT_OF_HOST_MEMORY
    {
        "MemoryError"
    } else {
        "InternalError"
    };
    Error::new(kind, format!("Vulkan error {r:?} ({r}) in {call}"))
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether the validation layer is asked for.
pub fn validation_requested() -> bool {
    env_flag("TVM_VULKAN_ENABLE_VALIDATION_LAYERS")
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data whose message is a NUL-terminated string.
    let text = unsafe { data.as_ref() }
        .filter(|d| !d.p_message.is_null())
        // SAFETY: as above.
        .map(|d| {
            unsafe { CStr::from_ptr(d.p_message) }
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        VALIDATION_ERRORS.fetch_add(1, Ordering::AcqRel);
        let mut m = VALIDATION_MESSAGES.lock();
        if m.len() < 32 {
            m.push(text.clone());
        }
        log::error!("Vulkan validation: {text}");
    } else {
        log::warn!("Vulkan validation: {text}");
    }
    vk::FALSE
}

fn open_loader() -> Result<ash::Entry> {
    let path = crate::device::library_override("TVMRT_VULKAN_LIBRARY")
        .unwrap_or_else(|| "libvulkan.so.1".to_string());
    // SAFETY: opening the Vulkan loader runs its initializers, which is what loading it is for.
    unsafe { ash::Entry::load_from(&path) }.map_err(|e| {
        // dlopen's own text is the error's cause (ash's libloading is not tvmrt's version).
        let cause = match std::error::Error::source(&e) {
            Some(c) => match std::error::Error::source(c) {
                Some(cc) => format!("{c}: {cc}"),
                None => c.to_string(),
            },
            None => e.to_string(),
        };
        Error::runtime(format!(
            "Vulkan is not available: cannot open `{path}` ({cause}); install the Vulkan loader \
             and a driver (Debian: libvulkan1 and mesa-vulkan-drivers)"
        ))
    })
}

fn create() -> Result<Context> {
    let entry = open_loader()?;
    // SAFETY: a loaded entry; the query has no arguments.
    let version = unsafe { entry.try_enumerate_instance_version() }
        .ok()
        .flatten()
        .unwrap_or(vk::API_VERSION_1_0);
    if version < vk::API_VERSION_1_1 {
        crate::bail_value!(
            "the Vulkan loader supports Vulkan {}.{}; tvmrt needs 1.1 or later",
            vk::api_version_major(version),
            vk::api_version_minor(version)
        );
    }
    let api = version.min(vk::API_VERSION_1_3);
    let app = vk::ApplicationInfo::default()
        .application_name(c"tvmrt")
        .engine_name(c"tvmrt")
        .api_version(api);
    let validate = validation_requested();
    let mut layers = Vec::new();
    let mut extensions = Vec::new();
    if validate {
        // SAFETY: a loaded entry.
        let have = unsafe { entry.enumerate_instance_layer_properties() }
            .map_err(|r| vk_error(r, "vkEnumerateInstanceLayerProperties"))?;
        if !have
            .iter()
            .any(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER))
        {
            crate::bail_value!(
                "TVM_VULKAN_ENABLE_VALIDATION_LAYERS is set but the Khronos validation layer is \
                 not installed (Debian: vulkan-validationlayers)"
            );
        }
        layers.push(VALIDATION_LAYER.as_ptr());
        extensions.push(ash::ext::debug_utils::NAME.as_ptr());
    }
    let info = vk::InstanceCreateInfo::default()
        .application_info(&app)
        .enabled_layer_names(&layers)
        .enabled_extension_names(&extensions);
    // SAFETY: the create info and what it points to live across the call.
    let instance = unsafe { entry.create_instance(&info, None) }.map_err(|r| {
        if r == vk::Result::ERROR_INCOMPATIBLE_DRIVER {
            no_device("the loader found no Vulkan driver")
        } else {
            vk_error(r, "vkCreateInstance")
        }
    })?;
    let debug = if validate {
        let du = ash::ext::debug_utils::Instance::new(&entry, &instance);
        let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
                    | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_message));
        // SAFETY: a live instance with the debug utils extension enabled.
        match unsafe { du.create_debug_utils_messenger(&info, None) } {
            Ok(m) => Some((du, m)),
            Err(r) => {
                // SAFETY: created above, nothing else uses it.
                unsafe { instance.destroy_instance(None) };
                return Err(vk_error(r, "vkCreateDebugUtilsMessengerEXT"));
            }
        }
    } else {
        None
    };
    let mut ctx = Context {
        entry,
        instance,
        debug,
        devices: Vec::new(),
    };
    // SAFETY: a live instance.
    let physical = unsafe { ctx.instance.enumerate_physical_devices() }
        .map_err(|r| vk_error(r, "vkEnumeratePhysicalDevices"))?;
    let mut ranked: Vec<(u32, vk::PhysicalDevice, vk::PhysicalDeviceProperties)> = physical
        .into_iter()
        .map(|pd| {
            // SAFETY: a physical device of the instance.
            let props = unsafe { ctx.instance.get_physical_device_properties(pd) };
            let rank = match props.device_type {
                vk::PhysicalDeviceType::DISCRETE_GPU => 0,
                vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
                vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
                _ => 3,
            };
            (rank, pd, props)
        })
        .filter(|(_, _, p)| p.api_version >= vk::API_VERSION_1_1)
        .collect();
    crate::cold_sort::sort_by_key(&mut ranked, |(rank, _, _)| *rank);
    let no_push = env_flag("TVM_VULKAN_DISABLE_PUSH_DESCRIPTOR");
    for (_, pd, props) in ranked {
        match open_device(&ctx, pd, props, no_push) {
            Ok(Some(d)) => ctx.devices.push(d),
            Ok(None) => {}
            Err(e) => log::warn!("skipping a Vulkan device: {e}"),
        }
    }
    if ctx.devices.is_empty() {
        return Err(no_device(
            "the loader found no Vulkan 1.1 device with a compute queue",
        ));
    }
    Ok(ctx)
}

/// The error for a machine whose loader found no usable driver or device.
fn no_device(why: &str) -> Error {
    let drivers = ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"]
        .iter()
        .filter_map(|v| std::env::var(v).ok().map(|x| format!("; {v} is `{x}`")))
        .collect::<String>();
    Error::runtime(format!(
        "no Vulkan device found: {why}{drivers} (install a driver: mesa-vulkan-drivers runs \
         Vulkan on the CPU)"
    ))
}

/// A logical device on `pd` with one compute queue, or `None` when it has no compute queue.
fn open_device(
    ctx: &Context,
    pd: vk::PhysicalDevice,
    props: vk::PhysicalDeviceProperties,
    no_push: bool,
) -> Result<Option<Device>> {
    let inst = &ctx.instance;
    // SAFETY: a physical device of the instance.
    let families = unsafe { inst.get_physical_device_queue_family_properties(pd) };
    let Some(family) = families
        .iter()
        .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
    else {
        return Ok(None);
    };
    let family = family as u32;
    // SAFETY: as above.
    let exts = unsafe { inst.enumerate_device_extension_properties(pd) }
        .map_err(|r| vk_error(r, "vkEnumerateDeviceExtensionProperties"))?;
    let has = |name: &CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(name));
    let push = !no_push && has(ash::khr::push_descriptor::NAME);
    let mut enable = Vec::new();
    if push {
        enable.push(ash::khr::push_descriptor::NAME.as_ptr());
    }
    // SAFETY: as above.
    let supported = unsafe { inst.get_physical_device_features(pd) };
    // The features TVM's SPIR-V may use, where the device has them.
    let features = vk::PhysicalDeviceFeatures::default()
        .shader_float64(supported.shader_float64 == vk::TRUE)
        .shader_int64(supported.shader_int64 == vk::TRUE)
        .shader_int16(supported.shader_int16 == vk::TRUE);
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(family)
        .queue_priorities(&priorities)];
    let info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&enable)
        .enabled_features(&features);
    // SAFETY: the create info and what it points to live across the call.
    let device = unsafe { inst.create_device(pd, &info, None) }
        .map_err(|r| vk_error(r, "vkCreateDevice"))?;
    // SAFETY: the queue family and index were created with the device.
    let queue = unsafe { device.get_device_queue(family, 0) };
    // SAFETY: as above.
    let memory = unsafe { inst.get_physical_device_memory_properties(pd) };
    let stream = match Stream::new(&device, family) {
        Ok(s) => s,
        Err(e) => {
            // SAFETY: created above, nothing else uses it.
            unsafe { device.destroy_device(None) };
            return Err(e);
        }
    };
    let push = push.then(|| ash::khr::push_descriptor::Device::new(inst, &device));
    let name = props
        .device_name_as_c_str()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    log::debug!(
        "Vulkan device `{name}` (push descriptors: {})",
        push.is_some()
    );
    Ok(Some(Device {
        physical: pd,
        device,
        queue,
        family,
        push,
        props,
        memory,
        features,
        name,
        stream: Mutex::new(stream),
    }))
}

impl Drop for Context {
    fn drop(&mut self) {
        // The context lives in a static and is never dropped; this keeps a test-made one tidy.
        for d in self.devices.drain(..) {
            // SAFETY: nothing uses the device after the context goes.
            unsafe {
                let _ = d.device.device_wait_idle();
                d.stream.lock().destroy(&d.device);
                d.device.destroy_device(None);
            }
        }
        if let Some((du, m)) = self.debug.take() {
            // SAFETY: created with the instance, destroyed once.
            unsafe { du.destroy_debug_utils_messenger(m, None) };
        }
        // SAFETY: every child object is gone.
        unsafe { self.instance.destroy_instance(None) };
    }
}

/// A C string of `s` (kernel names, which the loader checked hold no NUL).
pub fn c_name(s: &str) -> CString {
    CString::new(s).unwrap_or_default()
}
