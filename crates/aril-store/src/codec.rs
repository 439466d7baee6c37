//! Binary form of chunk vectors in the embedding cache: per chunk, `start:u32 end:u32 dim:u32`
//! then `dim` little-endian f32.

use crate::{StoreError, StoredChunk};

pub(crate) fn encode(chunks: &[StoredChunk]) -> Vec<u8> {
    let mut out = Vec::with_capacity(chunks.iter().map(|c| 12 + 4 * c.vector.len()).sum());
    for c in chunks {
        out.extend_from_slice(&c.start.to_le_bytes());
        out.extend_from_slice(&c.end.to_le_bytes());
        out.extend_from_slice(&(c.vector.len() as u32).to_le_bytes());
        for x in &c.vector {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<StoredChunk>, StoreError> {
    let corrupt = || StoreError::Corrupt("an embedding-cache entry is truncated".into());
    let mut chunks = Vec::new();
    let mut rest = bytes;
    let take_u32 = |rest: &mut &[u8]| -> Result<u32, StoreError> {
        let (head, tail) = rest.split_first_chunk::<4>().ok_or_else(corrupt)?;
        *rest = tail;
        Ok(u32::from_le_bytes(*head))
    };
    while !rest.is_empty() {
        let start = take_u32(&mut rest)?;
        let end = take_u32(&mut rest)?;
        let dim = take_u32(&mut rest)? as usize;
        let mut vector = Vec::with_capacity(dim);
        for _ in 0..dim {
            vector.push(f32::from_bits(take_u32(&mut rest)?));
        }
        chunks.push(StoredChunk { start, end, vector });
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_round_trip_and_truncation_is_caught() {
        let chunks = vec![
            StoredChunk {
                start: 0,
                end: 5,
                vector: vec![0.5, -1.0, 2.25],
            },
            StoredChunk {
                start: 5,
                end: 9,
                vector: vec![1.0, 0.0, 0.0],
            },
        ];
        let bytes = encode(&chunks);
        assert_eq!(decode(&bytes).unwrap(), chunks);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
