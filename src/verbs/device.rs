//! Devices: the list of RDMA devices present, an open device
//! ([`Context`]), its ports and GIDs.

use std::ffi::CStr;
use std::io;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;

use super::{check_rc, os_err, VerbsError};

/// `IBV_LINK_LAYER_INFINIBAND` / `_ETHERNET` (preprocessor constants that
/// the bindings do not carry).
pub const LINK_LAYER_INFINIBAND: u8 = 1;
pub const LINK_LAYER_ETHERNET: u8 = 2;

/// libibverbs finds no provider).
pub fn device_names() -> Vec<String> {
    let mut n: i32 = 0;
    // SAFETY: ibv_get_device_list returns an array of n device pointers
    // (or NULL), freed below with ibv_free_device_list.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let mut names = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: i < n, so the entry is a valid device pointer of the list;
        // its name is a NUL-terminated string owned by the device.
        let name = unsafe {
            let dev = *list.add(i);
            CStr::from_ptr(sys::ibv_get_device_name(dev))
        };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: list came from ibv_get_device_list and is freed once.
    unsafe { sys::ibv_free_device_list(list) };
    names
}

/// An open device.
pub struct Context {
    ctx: NonNull<sys::ibv_context>,
    name: String,
}

// SAFETY: libibverbs contexts may be used from any thread (the library
// locks internally where needed); we never share them without Arc.
unsafe impl Send for Context {}
// SAFETY: as above; all methods take &self and call thread-safe verbs.
unsafe impl Sync for Context {}

/// The attributes of a port we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub state: u32,
    /// `ibv_mtu` enum value (1 = 256 B … 5 = 4096 B).
    pub active_mtu: u32,
    pub lid: u16,
    pub link_layer: u8,
    pub gid_table_len: u32,
    pub max_msg_bytes: u32,
}

impl PortInfo {
    /// The active MTU in bytes.
    pub fn mtu_bytes(&self) -> usize {
        mtu_bytes(self.active_mtu)
    }
    pub fn is_ethernet(&self) -> bool {
        self.link_layer == LINK_LAYER_ETHERNET
    }
}

/// Bytes of an `ibv_mtu` enum value.
pub fn mtu_bytes(mtu: u32) -> usize {
    128usize << mtu.clamp(1, 5)
}

impl Context {
    /// Open the device called `name`.
    pub fn open(name: &str) -> Result<Arc<Context>, VerbsError> {
        let mut n: i32 = 0;
        // SAFETY: as in device_names.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(VerbsError::NoDevice {
                name: name.to_string(),
                present: Vec::new(),
            });
        }
        let mut present = Vec::new();
        let mut opened: *mut sys::ibv_context = ptr::null_mut();
        for i in 0..n.max(0) as usize {
            // SAFETY: i < n: a valid device of the list, its name NUL-terminated.
            let (dev, dev_name) = unsafe {
                let dev = *list.add(i);
                (
                    dev,
                    CStr::from_ptr(sys::ibv_get_device_name(dev))
                        .to_string_lossy()
                        .into_owned(),
                )
            };
            if dev_name == name {
                // SAFETY: dev is valid until the list is freed; an opened
                // context stays valid after ibv_free_device_list.
                opened = unsafe { sys::ibv_open_device(dev) };
                if opened.is_null() {
                    let e = os_err("ibv_open_device");
                    // SAFETY: freed once.
                    unsafe { sys::ibv_free_device_list(list) };
                    return Err(e);
                }
                break;
            }
            present.push(dev_name);
        }
        // SAFETY: list came from ibv_get_device_list and is freed once.
        unsafe { sys::ibv_free_device_list(list) };
        match NonNull::new(opened) {
            Some(ctx) => Ok(Arc::new(Context {
                ctx,
                name: name.to_string(),
            })),
            None => Err(VerbsError::NoDevice {
                name: name.to_string(),
                present,
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Attributes of `port` (1-based).
    pub fn port(&self, port: u8) -> Result<PortInfo, VerbsError> {
        // SAFETY: ibv_port_attr is plain old data; all-zero is valid.
        let mut attr: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open; attr is a valid out-pointer of the
        // size the inline wrapper passes to the provider.
        let rc = unsafe { sys::___ibv_query_port(self.ctx.as_ptr(), port, &mut attr) };
        check_rc(rc, "ibv_query_port")?;
        Ok(PortInfo {
            state: attr.state,
            active_mtu: attr.active_mtu,
            lid: attr.lid,
            link_layer: attr.link_layer,
            gid_table_len: attr.gid_tbl_len.max(0) as u32,
            max_msg_bytes: attr.max_msg_sz,
        })
    }

    /// GID `index` of `port`.
    pub fn gid(&self, port: u8, index: u32) -> Result<[u8; 16], VerbsError> {
        let mut gid = sys::ibv_gid { raw: [0; 16] };
        // SAFETY: the context is open; gid is a valid 16-byte out-pointer.
        let rc = unsafe { sys::ibv_query_gid(self.ctx.as_ptr(), port, index as i32, &mut gid) };
        if rc != 0 {
            return Err(VerbsError::BadGid {
                device: self.name.clone(),
                port,
                index,
                why: format!("ibv_query_gid: {}", io::Error::last_os_error()),
            });
        }
        // SAFETY: every bit pattern of the union is a valid [u8; 16].
        Ok(unsafe { gid.raw })
    }

    /// The kernel's type of GID `index` ("RoCE v2", "IB/RoCE v1"), if sysfs
    /// tells.
    pub fn gid_type(&self, port: u8, index: u32) -> Option<String> {
        let p = format!(
            "/sys/class/infiniband/{}/ports/{port}/gid_attrs/types/{index}",
            self.name
        );
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// The GID index to use when none is given: 0 on InfiniBand; on RoCE the
    /// first non-zero RoCE v2 GID, preferring an IPv4-mapped one.
    pub fn default_gid_index(&self, port: u8, info: &PortInfo) -> u32 {
        if !info.is_ethernet() {
            return 0;
        }
        let mut first_v2 = None;
        for i in 0..info.gid_table_len.min(256) {
            let Ok(g) = self.gid(port, i) else { continue };
            if g == [0; 16] {
                continue;
            }
            let v2 = self
                .gid_type(port, i)
                .map(|t| t.contains("v2"))
                .unwrap_or(true);
            if !v2 {
                continue;
            }
            if g[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
                return i;
            }
            first_v2.get_or_insert(i);
        }
        first_v2.unwrap_or(0)
    }

    pub(super) fn raw(&self) -> *mut sys::ibv_context {
        self.ctx.as_ptr()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every child object holds an Arc<Context>, so none is
        // alive any more; the context is closed once.
        unsafe { sys::ibv_close_device(self.ctx.as_ptr()) };
    }
}
