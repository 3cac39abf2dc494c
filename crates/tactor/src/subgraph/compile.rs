//! Compilation: checks a [`SubgraphBuilder`] and lays it out per worker.
//!
//! Vertices are renumbered so that each worker's vertices are contiguous: worker `w` owns
//! `seg[w]..seg[w+1]`, and an resident's copy of the counter image for `w` is that slice of
//! `image`. Each vertex's successors are listed cross-worker first (they are messages, and
//! the receiving worker may be waiting for them), then same-worker.

use super::{SubgraphBuilder, SubgraphError, TaskFn};
use std::collections::HashMap;

/// A compiled subgraph: immutable, shared by all its instances.
pub(crate) struct Compiled<A> {
    pub(crate) funcs: Vec<TaskFn<A>>,
    /// Builder index of each vertex, for error messages.
    pub(crate) original: Vec<u32>,
    pub(crate) worker_of: Vec<u32>,
    pub(crate) seg: Vec<u32>,
    pub(crate) succ_start: Vec<u32>,
    /// Per vertex: where its same-worker successors start in `succ`.
    pub(crate) local_start: Vec<u32>,
    pub(crate) succ: Vec<u32>,
    /// Postconditions signalled by the same tasks share one event: a group. Per vertex, the
    /// groups it signals (CSR).
    pub(crate) group_start: Vec<u32>,
    pub(crate) groups_of: Vec<u32>,
    /// Per postcondition, its group.
    pub(crate) post_group: Vec<u32>,
    pub(crate) pre_start: Vec<u32>,
    pub(crate) pre_targets: Vec<u32>,
    pub(crate) image: Vec<u32>,
    /// Per group, how many tasks signal it.
    pub(crate) group_sources: Vec<u32>,
    pub(crate) workers_used: Vec<usize>,
}

fn csr(n: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; n + 1];
    for (a, _) in pairs.clone() {
        start[a as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut out = vec![0u32; start[n] as usize];
    for (a, b) in pairs {
        out[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
    }
    (start, out)
}

/// Checks `b`'s tasks, workers, edges and conditions for `workers` workers (all of
/// [`Compiled::new`]'s checks but the cycle search, which needs the graph's edges laid out).
pub(crate) fn check<A>(b: &SubgraphBuilder<A>, workers: usize) -> Result<(), SubgraphError> {
    let n = b.funcs.len();
    if n >= crate::runtime::channel::MAX_VERTICES {
        return Err(SubgraphError::TooManyTasks(n));
    }
    for (t, &w) in b.workers.iter().enumerate() {
        if w >= workers {
            return Err(SubgraphError::BadWorker {
                task: t as u32,
                worker: w,
                workers,
            });
        }
    }
    let task = |t: u32| {
        if (t as usize) < n {
            Ok(t)
        } else {
            Err(SubgraphError::NoSuchTask(t))
        }
    };
    for &(a, c) in &b.edges {
        task(a)?;
        task(c)?;
        if a == c {
            return Err(SubgraphError::SelfEdge(a));
        }
    }
    for &(p, t) in &b.pre_edges {
        task(t)?;
        if p >= b.pres {
            return Err(SubgraphError::NoSuchCondition(p));
        }
    }
    for &(t, p) in &b.post_edges {
        task(t)?;
        if p >= b.posts {
            return Err(SubgraphError::NoSuchCondition(p));
        }
    }
    Ok(())
}

/// Groups the postconditions by the set of tasks (compiled numbering) that signal them: each
/// group becomes one event per instance, triggered once, and an instance chained behind it
/// subscribes once per group, not once per postcondition (a chunk of Task Bench's `compiled`
/// has a slot condition per graph, row and point, and a handful of distinct signalling sets).
/// Returns each postcondition's group and each group's tasks.
fn post_groups(posts: usize, edges: &[(u32, u32)], new_id: &[u32]) -> (Vec<u32>, Vec<Vec<u32>>) {
    let mut sources: Vec<Vec<u32>> = vec![Vec::new(); posts];
    for &(t, p) in edges {
        sources[p as usize].push(new_id[t as usize]);
    }
    let mut index: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut members = Vec::new();
    let group = sources
        .into_iter()
        .map(|mut tasks| {
            tasks.sort_unstable();
            tasks.dedup();
            *index.entry(tasks).or_insert_with_key(|tasks| {
                members.push(tasks.clone());
                members.len() as u32 - 1
            })
        })
        .collect();
    (group, members)
}

/// Kahn's algorithm on a copy of the in-degrees: a vertex never freed lies on a cycle.
fn find_cycle(indeg: &[u32], succ_start: &[u32], succ: &[u32]) -> Option<usize> {
    let mut indeg = indeg.to_vec();
    let mut stack: Vec<u32> = (0..indeg.len() as u32)
        .filter(|&v| indeg[v as usize] == 0)
        .collect();
    while let Some(v) = stack.pop() {
        for &s in &succ[succ_start[v as usize] as usize..succ_start[v as usize + 1] as usize] {
            indeg[s as usize] -= 1;
            if indeg[s as usize] == 0 {
                stack.push(s);
            }
        }
    }
    indeg.iter().position(|&d| d > 0)
}

impl<A> Compiled<A> {
    pub(crate) fn new(b: SubgraphBuilder<A>, workers: usize) -> Result<Compiled<A>, SubgraphError> {
        check(&b, workers)?;
        let n = b.funcs.len();
        // Renumber: worker-major, builder order within a worker.
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&t| (b.workers[t as usize], t));
        let mut new_id = vec![0u32; n];
        for (new, &old) in order.iter().enumerate() {
            new_id[old as usize] = new as u32;
        }
        let worker_of: Vec<u32> = order
            .iter()
            .map(|&old| b.workers[old as usize] as u32)
            .collect();
        let mut seg = vec![0u32; workers + 1];
        for &w in &b.workers {
            seg[w + 1] += 1;
        }
        for w in 0..workers {
            seg[w + 1] += seg[w];
        }
        let mut edges: Vec<(u32, u32)> = b
            .edges
            .iter()
            .map(|&(a, c)| (new_id[a as usize], new_id[c as usize]))
            .collect();
        let same = |&(a, c): &(u32, u32)| worker_of[a as usize] == worker_of[c as usize];
        // Cross-worker successors first within each vertex's list, then in builder order.
        // An edge given twice (a program's data edge that also orders a reuse) is kept once:
        // across workers each copy would be a message of its own.
        edges.sort_unstable_by_key(|e| (e.0, same(e), e.1));
        edges.dedup();
        let (succ_start, succ) = csr(n, edges.iter().copied());
        let local_start = (0..n)
            .map(|v| {
                let (a, c) = (succ_start[v], succ_start[v + 1]);
                a + succ[a as usize..c as usize]
                    .iter()
                    .take_while(|&&s| worker_of[s as usize] != worker_of[v])
                    .count() as u32
            })
            .collect();
        let mut image = vec![0u32; n];
        for &(_, c) in &edges {
            image[c as usize] += 1;
        }
        if let Some(v) = find_cycle(&image, &succ_start, &succ) {
            return Err(SubgraphError::Cycle(order[v]));
        }
        let pre_pairs = b.pre_edges.iter().map(|&(p, t)| (p, new_id[t as usize]));
        let (pre_start, pre_targets) = csr(b.pres as usize, pre_pairs.clone());
        for (_, t) in pre_pairs {
            image[t as usize] += 1;
        }
        let (post_group, group_members) = post_groups(b.posts as usize, &b.post_edges, &new_id);
        let group_pairs = group_members
            .iter()
            .enumerate()
            .flat_map(|(g, tasks)| tasks.iter().map(move |&t| (t, g as u32)));
        let (group_start, groups_of) = csr(n, group_pairs);
        let group_sources = group_members.iter().map(|m| m.len() as u32).collect();
        let mut funcs: Vec<Option<TaskFn<A>>> = b.funcs.into_iter().map(Some).collect();
        let funcs = order
            .iter()
            .map(|&old| funcs[old as usize].take().expect("each task once"))
            .collect();
        let workers_used = (0..workers).filter(|&w| seg[w + 1] > seg[w]).collect();
        Ok(Compiled {
            funcs,
            original: order,
            worker_of,
            seg,
            succ_start,
            local_start,
            succ,
            group_start,
            groups_of,
            post_group,
            pre_start,
            pre_targets,
            image,
            group_sources,
            workers_used,
        })
    }

    pub(crate) fn tasks(&self) -> usize {
        self.funcs.len()
    }

    pub(crate) fn preconditions(&self) -> usize {
        self.pre_start.len() - 1
    }
}
