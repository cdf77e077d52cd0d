package main

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// maxMemberBytes caps a member before decoding; a tier record is tens of bytes.
const maxMemberBytes = 64 << 10

var errMemberTooBig = errors.New("bench: member larger than 64 KiB")

// decodeMember decodes one sorted-set member as a naive reader would: into
// a generic msgpack value, every field materialised. It is guarded the way
// the project decodes anything read from Redis (msgpack v5.4.1 can be made
// to allocate 512 GiB from 5 bytes): the size is capped, Skip walks the
// bytes first, the input must be consumed whole, and a panic is an error.
func decodeMember(b []byte) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("bench: decode member: panic: %v", r)
		}
	}()
	if len(b) > maxMemberBytes {
		return nil, errMemberTooBig
	}
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	if err := dec.Skip(); err != nil {
		return nil, fmt.Errorf("bench: decode member: %w", err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("bench: decode member: %d trailing bytes", r.Len())
	}
	r.Reset(b)
	dec.Reset(r)
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("bench: decode member: %w", err)
	}
	return v, nil
}
