//! The reference's graph self-check: no point appears twice in one task's dependencies, every
//! dependency stays inside the graph, and reverse dependencies mirror forward ones exactly.

use super::{Interval, TaskGraph};
use crate::error::ConfigError;
use std::collections::HashSet;

/// Checks every timestep of `g` (each distinct timestep shape once: see
/// [`TaskGraph::timestep_classes`]).
///
/// ```
/// use taskbench_core::graph::{check_graph, DependenceType, TaskGraph};
/// let g = TaskGraph { dependence: DependenceType::Fft, max_width: 8, ..TaskGraph::default() };
/// assert!(check_graph(&g).is_ok());
/// ```
pub fn check_graph(g: &TaskGraph) -> Result<(), ConfigError> {
    let w = g.max_width.max(0) as usize;
    let mut seen = HashSet::new();
    // stamp[p] == tag marks p as already seen for the task being checked, without clearing.
    let mut stamp = vec![usize::MAX; w];
    let mut forward: Vec<Vec<i64>> = Vec::new();
    let mut raw: Vec<Interval> = Vec::new();
    let mut tag = 0usize;
    for t in g.timestep_classes().into_iter().map(|c| c.first) {
        let (off, wid) = (g.offset_at_timestep(t), g.width_at_timestep(t));
        let (loff, lwid) = (g.offset_at_timestep(t - 1), g.width_at_timestep(t - 1));
        let dset = g.dependence_set_at_timestep(t);
        if !seen.insert((dset, off, wid, loff, lwid)) {
            continue;
        }
        let bad = |point: i64, what: String| ConfigError::BadGraph {
            graph: g.graph_index,
            timestep: t,
            point,
            what,
        };
        forward.clear();
        for p in off..off + wid {
            tag += 1;
            g.dependencies_into(dset, p, &mut raw);
            let mut kept = Vec::new();
            for &(a, b) in &raw {
                for d in a..=b {
                    if d < 0 || d >= g.max_width {
                        return Err(bad(
                            p,
                            format!(
                                "dependency {d} is outside the graph's width {}",
                                g.max_width
                            ),
                        ));
                    }
                    if stamp[d as usize] == tag {
                        return Err(bad(p, format!("dependency {d} appears twice")));
                    }
                    stamp[d as usize] = tag;
                    if d >= loff && d < loff + lwid {
                        kept.push(d);
                    }
                }
            }
            kept.sort_unstable();
            forward.push(kept);
        }
        let mut reverse_edges = 0usize;
        for q in loff..loff + lwid {
            tag += 1;
            g.reverse_dependencies_into(dset, q, &mut raw);
            for &(a, b) in &raw {
                for c in a..=b {
                    if c < 0 || c >= g.max_width {
                        return Err(bad(
                            q,
                            format!(
                                "reverse dependency {c} is outside the graph's width {}",
                                g.max_width
                            ),
                        ));
                    }
                    if stamp[c as usize] == tag {
                        return Err(bad(q, format!("reverse dependency {c} appears twice")));
                    }
                    stamp[c as usize] = tag;
                    if c < off || c >= off + wid {
                        continue;
                    }
                    if forward[(c - off) as usize].binary_search(&q).is_err() {
                        return Err(bad(q, format!("reverse dependency {c} has no matching dependency of point {c} on {q}")));
                    }
                    reverse_edges += 1;
                }
            }
        }
        let forward_edges: usize = forward.iter().map(Vec::len).sum();
        if forward_edges != reverse_edges {
            return Err(bad(
                off,
                format!("{forward_edges} dependencies but {reverse_edges} reverse dependencies: they do not mirror each other"),
            ));
        }
    }
    Ok(())
}
