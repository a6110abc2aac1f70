package replay

// mix folds x into the running hash h (a 64-bit finalizer over h and x).
func mix(h, x uint64) uint64 {
	h ^= x + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// streamHash is FNV-1a over a stream's name.
func streamHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// prefixBlocks appends to dst the chained hashes of the full blocks of
// bt tokens of the prompt segs, extended by extra tokens of the last
// segment's stream (the output). Block j's hash covers every token before
// the block's end, so two prompts share block j exactly when they agree on
// its first (j+1)*bt tokens. A partial last block has no hash: it is not
// cached.
func prefixBlocks(dst []uint64, segs []Segment, extra, bt int) []uint64 {
	h := uint64(0x84222325cbf29ce4)
	fill := 0
	for i, s := range segs {
		n := s.Tokens
		if i == len(segs)-1 {
			n += extra
		}
		sh := streamHash(s.Stream)
		for off := 0; off < n; {
			take := min(bt-fill, n-off)
			h = mix(mix(mix(h, sh), uint64(off)), uint64(take))
			off += take
			fill += take
			if fill == bt {
				dst = append(dst, h)
				fill = 0
			}
		}
	}
	return dst
}

// chainBlocks appends to dst the chained hashes of a trace's given block
// hashes, so equal hashes at a position mean equal prefixes even when the
// trace's hashes are not chained themselves.
func chainBlocks(dst []uint64, blocks []uint64) []uint64 {
	h := uint64(0x84222325cbf29ce4)
	for _, b := range blocks {
		h = mix(h, b)
		dst = append(dst, h)
	}
	return dst
}
