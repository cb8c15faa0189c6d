//! An indexed min-heap of `(time, index)` keys: each index (an engine, a replica's front-end)
//! holds at most one key, which can be set, changed or removed in O(log n). The simulation uses
//! it for its event sources so that finding the next event costs O(log n), not a scan of every
//! engine; ties on time go to the lowest index, as the flat scan they replace did.

use crate::units::Ticks;

const NONE: u32 = u32::MAX;

/// `(time, index)` as one integer ordered as the pair (time first, then index), so a
/// comparison is one integer comparison.
#[inline]
fn key(t: Ticks, i: u32) -> u128 {
    ((t.0 as u128) << 32) | i as u128
}

#[inline]
fn index_of(k: u128) -> u32 {
    k as u32
}

#[inline]
fn time_of(k: u128) -> Ticks {
    Ticks((k >> 32) as u64)
}

#[derive(Clone, Debug, Default)]
pub struct IndexedHeap {
    /// Binary heap of `key(time, index)`.
    heap: Vec<u128>,
    /// Position of each index in `heap`, or `NONE`.
    pos: Vec<u32>,
}

impl IndexedHeap {
    /// A heap for indices `0..n`, all absent.
    pub fn new(n: usize) -> IndexedHeap {
        IndexedHeap {
            heap: Vec::with_capacity(n),
            pos: vec![NONE; n],
        }
    }

    /// The smallest `(time, index)`.
    #[inline]
    pub fn peek(&self) -> Option<(Ticks, u32)> {
        self.heap.first().map(|&k| (time_of(k), index_of(k)))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Sets (or with `None` removes) the key of index `i`.
    #[inline]
    pub fn set(&mut self, i: u32, t: Option<Ticks>) {
        let p = self.pos[i as usize];
        match (p, t) {
            (NONE, None) => {}
            (NONE, Some(t)) => {
                let at = self.heap.len();
                self.heap.push(key(t, i));
                self.pos[i as usize] = at as u32;
                self.up(at);
            }
            (p, None) => {
                let p = p as usize;
                let last = self.heap.len() - 1;
                self.swap(p, last);
                self.heap.pop();
                self.pos[i as usize] = NONE;
                if p < self.heap.len() {
                    self.down(p);
                    self.up(p);
                }
            }
            (p, Some(t)) => {
                let p = p as usize;
                let old = self.heap[p];
                let new = key(t, i);
                if old == new {
                    return;
                }
                self.heap[p] = new;
                if new < old {
                    self.up(p);
                } else {
                    self.down(p);
                }
            }
        }
    }

    #[inline]
    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[index_of(self.heap[a]) as usize] = a as u32;
        self.pos[index_of(self.heap[b]) as usize] = b as u32;
    }

    /// Moves the entry at `start` towards the root while it is smaller than its parent (a hole
    /// walks up; each parent moved down is written once).
    fn up(&mut self, start: usize) {
        let e = self.heap[start];
        let mut i = start;
        while i > 0 {
            let parent = (i - 1) / 2;
            let p = self.heap[parent];
            if e < p {
                self.heap[i] = p;
                self.pos[index_of(p) as usize] = i as u32;
                i = parent;
            } else {
                break;
            }
        }
        if i != start {
            self.heap[i] = e;
            self.pos[index_of(e) as usize] = i as u32;
        }
    }

    /// Moves the entry at `start` towards the leaves while a child is smaller (a hole walks
    /// down; each child moved up is written once).
    fn down(&mut self, start: usize) {
        let n = self.heap.len();
        let e = self.heap[start];
        let mut i = start;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let mut c = l;
            if l + 1 < n && self.heap[l + 1] < self.heap[l] {
                c = l + 1;
            }
            let ce = self.heap[c];
            if ce < e {
                self.heap[i] = ce;
                self.pos[index_of(ce) as usize] = i as u32;
                i = c;
            } else {
                break;
            }
        }
        if i != start {
            self.heap[i] = e;
            self.pos[index_of(e) as usize] = i as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Against a plain scan over a key array: same minimum (time, lowest index) after each of
    /// many random sets and removals.
    #[test]
    fn matches_a_scan() {
        let n = 37;
        let mut h = IndexedHeap::new(n);
        let mut keys: Vec<Option<Ticks>> = vec![None; n];
        let mut rng = Rng::new(7);
        for _ in 0..20_000 {
            let i = rng.range_u64(0, n as u64 - 1) as u32;
            let t = if rng.next_f64() < 0.2 {
                None
            } else {
                Some(Ticks(rng.range_u64(0, 50)))
            };
            keys[i as usize] = t;
            h.set(i, t);
            let want = keys
                .iter()
                .enumerate()
                .filter_map(|(j, k)| k.map(|t| (t, j as u32)))
                .min();
            assert_eq!(h.peek(), want);
            assert_eq!(h.len(), keys.iter().filter(|k| k.is_some()).count());
        }
    }
}
