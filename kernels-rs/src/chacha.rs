//! The ChaCha block function as a counter-based random number generator.
//!
//! A block is a pure function of (key, block counter, stream): 16 words of output
//! and no state to initialise, advance or store. gpuq's Monte Carlo walks use the
//! seed as the key and the history id as the stream, so every history owns a
//! stream of 2^64 blocks that no other history touches, and any thread on any
//! backend can produce any history's numbers directly: there is no per-thread
//! set-up (cuRAND's `curand_init` skip-ahead), and no seeding of threads with
//! nearby seeds whose streams may be correlated.
//!
//! The state layout is that of `rand_chacha` (the original ChaCha with a 64-bit
//! block counter in words 12-13 and a 64-bit stream id in words 14-15), so
//! [`block`] with key `k`, counter `c` and stream `s` gives the 16 words that
//! `rand_chacha::ChaCha{8,12,20}Rng::from_seed(k)` with `set_stream(s)` yields
//! from word position `16 c` on. A test in `gpuq-mcls` checks that.

/// The constant words "expand 32-byte k".
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// Words in one block of output.
pub const BLOCK_WORDS: usize = 16;

/// ChaCha's quarter round on four words of the state.
#[inline(always)]
fn quarter(x: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(16);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(12);
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(8);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(7);
}

/// The 32-byte key gpuq derives from a 64-bit seed: the seed's two little-endian
/// words, then zeros (the same bytes as `seed.to_le_bytes()` padded to 32).
#[inline(always)]
pub fn key_from_seed(seed: u64) -> [u32; 8] {
    [seed as u32, (seed >> 32) as u32, 0, 0, 0, 0, 0, 0]
}

/// Block `counter` of stream `stream` under `key`, with `DOUBLE_ROUNDS` double
/// rounds (4 for ChaCha8, 10 for ChaCha20). Cost: 8 `DOUBLE_ROUNDS` quarter rounds
/// (12 integer operations each) for 16 words.
#[inline(always)]
pub fn block<const DOUBLE_ROUNDS: usize>(key: &[u32; 8], counter: u64, stream: u64) -> [u32; 16] {
    let input = [
        SIGMA[0],
        SIGMA[1],
        SIGMA[2],
        SIGMA[3],
        key[0],
        key[1],
        key[2],
        key[3],
        key[4],
        key[5],
        key[6],
        key[7],
        counter as u32,
        (counter >> 32) as u32,
        stream as u32,
        (stream >> 32) as u32,
    ];
    let mut x = input;
    let mut r = 0;
    while r < DOUBLE_ROUNDS {
        quarter(&mut x, 0, 4, 8, 12);
        quarter(&mut x, 1, 5, 9, 13);
        quarter(&mut x, 2, 6, 10, 14);
        quarter(&mut x, 3, 7, 11, 15);
        quarter(&mut x, 0, 5, 10, 15);
        quarter(&mut x, 1, 6, 11, 12);
        quarter(&mut x, 2, 7, 8, 13);
        quarter(&mut x, 3, 4, 9, 14);
        r += 1;
    }
    let mut i = 0;
    while i < 16 {
        x[i] = x[i].wrapping_add(input[i]);
        i += 1;
    }
    x
}

/// The double rounds of ChaCha8, the generator gpuq's walks use.
pub const CHACHA8: usize = 4;

/// A word mapped to the open interval (0, 1): `(w + 1/2) 2^-32`. Never 0 or 1,
/// so a draw compared with cumulative probabilities always lands inside a row.
#[inline(always)]
pub fn unit_open(w: u32) -> f64 {
    (w as f64 + 0.5) * (1.0 / 4_294_967_296.0)
}

/// Sequential words of one stream, a block at a time: the walk's view of its
/// history's random numbers. Holds one block (64 bytes) and a position.
pub struct Stream {
    key: [u32; 8],
    stream: u64,
    counter: u64,
    buf: [u32; 16],
    pos: usize,
}

impl Stream {
    /// The stream `stream` under `key`, positioned at its first word.
    #[inline(always)]
    pub fn new(key: [u32; 8], stream: u64) -> Self {
        Stream {
            key,
            stream,
            counter: 0,
            buf: [0; 16],
            pos: BLOCK_WORDS,
        }
    }

    /// The next word of the stream (one ChaCha8 block every 16 calls).
    #[inline(always)]
    pub fn next_u32(&mut self) -> u32 {
        if self.pos == BLOCK_WORDS {
            self.buf = block::<CHACHA8>(&self.key, self.counter, self.stream);
            self.counter += 1;
            self.pos = 0;
        }
        // Take the front word and rotate the block by one: constant indices only,
        // so on the GPU the block stays in registers (a dynamic index would put
        // it in local memory).
        let b = self.buf;
        self.buf = [
            b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
            b[14], b[15], b[0],
        ];
        self.pos += 1;
        b[0]
    }

    /// The next word mapped to (0, 1) by [`unit_open`].
    #[inline(always)]
    pub fn next_unit(&mut self) -> f64 {
        unit_open(self.next_u32())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7539 section 2.3.2 has a 32-bit counter and a 96-bit nonce; with the
    /// 64/64 split, its counter 1 and nonce (0x09000000, 0x4a000000, 0) are
    /// counter 0x0900_0000_0000_0001 and stream 0x4a000000.
    #[test]
    fn rfc7539_block_test_vector() {
        let key: [u32; 8] = core::array::from_fn(|i| {
            u32::from_le_bytes([
                4 * i as u8,
                4 * i as u8 + 1,
                4 * i as u8 + 2,
                4 * i as u8 + 3,
            ])
        });
        let out = block::<10>(&key, 0x0900_0000_0000_0001, 0x4a00_0000);
        let expected = [
            0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033, 0x9aaa2204,
            0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9, 0xd19c12b5, 0xb94e16de,
            0xe883d0cb, 0x4e3c50a2,
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn unit_open_stays_inside() {
        assert!(unit_open(0) > 0.0);
        assert!(unit_open(u32::MAX) < 1.0);
    }

    #[test]
    fn stream_walks_blocks_in_order() {
        let key = key_from_seed(7);
        let mut s = Stream::new(key, 3);
        let b0 = block::<CHACHA8>(&key, 0, 3);
        let b1 = block::<CHACHA8>(&key, 1, 3);
        let words: [u32; 32] = core::array::from_fn(|_| s.next_u32());
        assert_eq!(&words[..16], &b0);
        assert_eq!(&words[16..], &b1);
    }
}
