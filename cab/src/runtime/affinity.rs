//! CPU topology and pinning: which cores are online ([`online_cores`]) and putting the calling
//! thread on one of them. Analyzers take the last cores, the application may take core 0.

/// Every online core of the machine, whatever the calling thread's affinity. (`core_affinity`
/// lists only the cores the calling thread may run on, and a thread inherits its creator's
/// mask: asking from a thread spawned by a pinned thread would see one core.)
pub fn online_cores() -> Vec<core_affinity::CoreId> {
    static CORES: std::sync::OnceLock<Vec<core_affinity::CoreId>> = std::sync::OnceLock::new();
    CORES
        .get_or_init(|| {
            let from_sysfs = std::fs::read_to_string("/sys/devices/system/cpu/online")
                .ok()
                .and_then(|s| parse_cpu_list(s.trim()));
            from_sysfs
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.into_iter()
                        .map(|id| core_affinity::CoreId { id })
                        .collect()
                })
                .or_else(core_affinity::get_core_ids)
                .unwrap_or_default()
        })
        .clone()
}

/// Parse a kernel CPU list such as `0-3,6,8-9`.
fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// Pin the calling thread to online core `core` (modulo the number of cores).
pub(super) fn pin_to(core: usize) {
    let ids = online_cores();
    if let Some(id) = ids.get(core % ids.len().max(1)) {
        core_affinity::set_for_current(*id);
    }
}
