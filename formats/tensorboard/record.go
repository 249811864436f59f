package tensorboard

import (
	"encoding/binary"
	"hash/crc32"
)

// A TFRecord file is a sequence of records:
//
//	length     uint64, little endian: the number of data bytes
//	length_crc uint32, little endian: masked CRC-32C of the 8 length bytes
//	data       length bytes
//	data_crc   uint32, little endian: masked CRC-32C of the data
//
// The CRC is masked (rotated right by 15 bits, plus a constant) because a
// CRC of data that holds CRCs is weak: TensorFlow's lib/hash/crc32c.h.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const crcMaskDelta = 0xa282ead8

// maskedCRC is TensorFlow's masked CRC-32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + crcMaskDelta
}

// recordOverhead is the framing around a record's data: 8 + 4 before, 4 after.
const recordOverhead = 16

// appendRecord appends data framed as one TFRecord.
func appendRecord(dst, data []byte) []byte {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], maskedCRC(head[:8]))
	dst = append(dst, head[:]...)
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(data))
}
