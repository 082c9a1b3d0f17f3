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

/// The index (into [`online_cores`]) of the core the calling thread runs on now, if the
/// system says.
pub(super) fn current_core() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sched_getcpu` takes no arguments and only reads the calling thread's state.
        let cpu = unsafe { libc::sched_getcpu() };
        let cpu = usize::try_from(cpu).ok()?;
        online_cores().iter().position(|c| c.id == cpu)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The core (index into [`online_cores`], of `cores > 1`) for analyzer `i`: the last cores,
/// counting down, skipping `app_core`, the application's.
pub(super) fn analyzer_core(i: usize, cores: usize, app_core: usize) -> usize {
    let app_core = app_core % cores;
    // The cores other than the application's, from the last down: the k-th of them.
    let k = i % (cores - 1);
    let c = cores - 1 - k;
    if c <= app_core {
        c - 1
    } else {
        c
    }
}

/// Pin the calling thread to online core `core` (modulo the number of cores).
pub(super) fn pin_to(core: usize) {
    let ids = online_cores();
    if let Some(id) = ids.get(core % ids.len().max(1)) {
        core_affinity::set_for_current(*id);
    }
}

#[cfg(test)]
mod tests {
    use super::analyzer_core;

    #[test]
    fn analyzers_avoid_the_application_core() {
        // Two cores: the analyzer takes the one the application is not on.
        assert_eq!(analyzer_core(0, 2, 0), 1);
        assert_eq!(analyzer_core(0, 2, 1), 0);
        // Four cores, application on core 2: analyzers take 3, 1, 0, then 3 again.
        let got: Vec<usize> = (0..4).map(|i| analyzer_core(i, 4, 2)).collect();
        assert_eq!(got, [3, 1, 0, 3]);
        // Application on core 0, as `pin_application` puts it: the last cores, down to 1.
        let got: Vec<usize> = (0..3).map(|i| analyzer_core(i, 4, 0)).collect();
        assert_eq!(got, [3, 2, 1]);
    }
}
