//! [`ThreadComm`]: ranks as threads of one process, talking through channels,
//! so that the distributed code runs (and is tested) without MPI.

use crate::comm::{check_gathered, check_rank, comm_error, Communicator};
use gpuq_core::Result;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;

/// The tag of the messages an allgather sends.
const ALLGATHER: u16 = u16::MAX;
/// The tag of the messages a broadcast sends.
const BROADCAST: u16 = u16::MAX - 1;

/// One message between two ranks.
struct Message {
    tag: u16,
    data: Vec<u8>,
}

/// One rank of a group of threads: a channel to and from every other rank of
/// the group (unbounded, so a send never blocks; messages between two ranks
/// arrive in the order sent).
///
/// Collectives cost O(size) messages per rank (an allgather sends the local
/// part to every other rank). When a rank drops its communicator (returns,
/// fails or panics), the others' receives from it fail instead of hanging.
pub struct ThreadComm {
    rank: usize,
    size: usize,
    to: Vec<Sender<Message>>,
    from: Vec<Mutex<Receiver<Message>>>,
}

impl ThreadComm {
    /// The communicators of a group of `size` ranks, to be moved into one
    /// thread each. Errors when `size` is zero.
    pub fn group(size: usize) -> Result<Vec<ThreadComm>> {
        if size == 0 {
            return Err(comm_error("a group needs at least one rank"));
        }
        // channels[src][dest]
        let mut senders: Vec<Vec<Sender<Message>>> = Vec::with_capacity(size);
        let mut receivers: Vec<Vec<Option<Receiver<Message>>>> = (0..size)
            .map(|_| (0..size).map(|_| None).collect())
            .collect();
        for src in 0..size {
            let mut row = Vec::with_capacity(size);
            for dest_receivers in receivers.iter_mut() {
                let (tx, rx) = channel();
                row.push(tx);
                dest_receivers[src] = Some(rx);
            }
            senders.push(row);
        }
        Ok(senders
            .into_iter()
            .zip(receivers)
            .enumerate()
            .map(|(rank, (to, from))| ThreadComm {
                rank,
                size,
                to,
                from: from
                    .into_iter()
                    .map(|rx| Mutex::new(rx.expect("every channel was created")))
                    .collect(),
            })
            .collect())
    }

    /// Runs `work` on `size` ranks, one scoped thread each, and returns their
    /// results in rank order. A panicking rank panics the caller after all
    /// threads ended. Errors when `size` is zero.
    pub fn run<R: Send>(size: usize, work: impl Fn(ThreadComm) -> R + Sync) -> Result<Vec<R>> {
        let group = Self::group(size)?;
        let work = &work;
        Ok(std::thread::scope(|s| {
            let handles: Vec<_> = group
                .into_iter()
                .map(|comm| s.spawn(move || work(comm)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        }))
    }
}

impl Communicator for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn allgather(&self, local: &[f64]) -> Result<Vec<f64>> {
        let bytes: Vec<u8> = local.iter().flat_map(|v| v.to_le_bytes()).collect();
        for dest in (0..self.size).filter(|&d| d != self.rank) {
            self.send(dest, ALLGATHER, &bytes)?;
        }
        let mut all = Vec::with_capacity(local.len() * self.size);
        for src in 0..self.size {
            if src == self.rank {
                all.extend_from_slice(local);
            } else {
                let data = self.recv(src, ALLGATHER)?;
                all.extend(
                    data.chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().expect("chunks of 8"))),
                );
            }
        }
        check_gathered(all.len(), local.len(), self.size)?;
        Ok(all)
    }

    fn broadcast(&self, root: usize, data: &mut Vec<u8>) -> Result<()> {
        check_rank("broadcast", root, self.size)?;
        if self.rank == root {
            for dest in (0..self.size).filter(|&d| d != root) {
                self.send(dest, BROADCAST, data)?;
            }
        } else {
            *data = self.recv(root, BROADCAST)?;
        }
        Ok(())
    }

    fn send(&self, dest: usize, tag: u16, data: &[u8]) -> Result<()> {
        check_rank("send", dest, self.size)?;
        self.to[dest]
            .send(Message {
                tag,
                data: data.to_vec(),
            })
            .map_err(|_| comm_error(format!("rank {dest} has left (send, tag {tag})")))
    }

    fn recv(&self, src: usize, tag: u16) -> Result<Vec<u8>> {
        check_rank("recv", src, self.size)?;
        let rx = self.from[src].lock().unwrap_or_else(|e| e.into_inner());
        let m = rx
            .recv()
            .map_err(|_| comm_error(format!("rank {src} has left (receive, tag {tag})")))?;
        if m.tag != tag {
            return Err(comm_error(format!(
                "rank {} expected tag {tag} from rank {src}, got {}",
                self.rank, m.tag
            )));
        }
        Ok(m.data)
    }

    fn exchange(
        &self,
        tag: u16,
        sends: &[(usize, &[u8])],
        from: &[usize],
        overlap: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Vec<Vec<u8>>> {
        for &(dest, data) in sends {
            self.send(dest, tag, data)?;
        }
        overlap()?;
        from.iter().map(|&src| self.recv(src, tag)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_agree_on_every_rank() {
        for size in 1..=4 {
            let out = ThreadComm::run(size, |c| {
                let r = c.rank() as f64;
                let sum = c.allreduce_sum(&[r, 1.0, 0.1 * r]).unwrap();
                let gathered = c.allgather(&[r]).unwrap();
                let mut data = if c.rank() == size - 1 {
                    vec![7u8, 8, 9]
                } else {
                    Vec::new()
                };
                c.broadcast(size - 1, &mut data).unwrap();
                c.barrier().unwrap();
                (sum, gathered, data)
            })
            .unwrap();
            for (sum, gathered, data) in &out {
                assert_eq!(sum, &out[0].0);
                assert_eq!(sum[1], size as f64);
                assert_eq!(gathered, &(0..size).map(|r| r as f64).collect::<Vec<_>>());
                assert_eq!(data, &vec![7u8, 8, 9]);
            }
        }
    }

    #[test]
    fn an_exchange_runs_the_overlap_and_delivers_in_order() {
        let out = ThreadComm::run(3, |c| {
            let next = (c.rank() + 1) % 3;
            let prev = (c.rank() + 2) % 3;
            let msg = [c.rank() as u8];
            let mut ran = false;
            let got = c
                .exchange(5, &[(next, &msg[..])], &[prev], &mut || {
                    ran = true;
                    Ok(())
                })
                .unwrap();
            (ran, got)
        })
        .unwrap();
        for (rank, (ran, got)) in out.into_iter().enumerate() {
            assert!(ran);
            assert_eq!(got, vec![vec![((rank + 2) % 3) as u8]]);
        }
    }

    #[test]
    fn a_departed_rank_or_a_wrong_tag_is_an_error_not_a_hang() {
        let out = ThreadComm::run(2, |c| {
            if c.rank() == 0 {
                c.send(1, 1, &[1]).unwrap();
                drop(c);
                None
            } else {
                let wrong = c.recv(0, 2).is_err();
                let gone = c.recv(0, 1).is_err();
                Some((wrong, gone))
            }
        })
        .unwrap();
        assert_eq!(out[1], Some((true, true)));
        assert!(ThreadComm::group(0).is_err());
        let g = ThreadComm::group(1).unwrap();
        assert!(g[0].send(1, 0, &[]).is_err());
    }
}
