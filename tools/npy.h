// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// The header is a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}
// after the magic "\x93NUMPY", two version bytes and a 2-byte (v1) or 4-byte (v2, v3) header
// length; data follows. Only simple dtypes (a byte-order character, a type character and an
// item size, e.g. '<f4', '|u1', '|b1') are supported, not structured ones.
#pragma once

#include "isa/dtype.h"
#include "isa/status.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tilus::npy {

struct Array {
  /// The descr as written in the file, e.g. "<f4".
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
  /// The data bytes, exactly prod(shape) * itemSize of them, as stored.
  std::vector<uint8_t> data;

  int64_t elements() const;
};

/// The item size of a simple descr ("<f4" -> 4), or an error.
Expected<int> itemSize(const std::string &descr);
/// A descr with byte order normalised: '=' becomes '<', and one-byte types use '|'.
std::string normalizeDescr(const std::string &descr);

/// The descr that .npy files of a Tilus dtype use (ISA section 8): '<f2', '<f4', '<f8', '|b1',
/// '|i1' '<i2' '<i4' '<i8', '|u1' '<u2' '<u4' '<u8'; bf16 as '<u2'; FP8 and every other
/// float of 8 bits or fewer as '|u1'; sub-byte integers as '|u1' (packed bytes).
std::string descrFor(DataType dtype);

Expected<Array> parse(std::span<const uint8_t> bytes);
/// The array in the regular file `path` (isa/file_io.h: directories, devices and FIFOs are
/// refused), refused before it is read when the file holds more than `maxBytes` bytes.
Expected<Array> readFile(const std::string &path, uint64_t maxBytes = uint64_t(1) << 40);

/// The data of an array in C order with little-endian items (byte-swapping '>' arrays and
/// reordering Fortran-ordered ones).
Expected<std::vector<uint8_t>> cOrderLittleEndian(const Array &array);

/// A version 1.0 file of a C-order array; the header is padded with spaces so that the data
/// starts at a multiple of 64 bytes, and ends with '\n'.
std::vector<uint8_t> encode(const std::string &descr, const std::vector<int64_t> &shape,
                            std::span<const uint8_t> data);
/// Write through isa/file_io.h's writeOutputFile (atomic for regular files, in place for
/// devices, an error for a directory).
Status writeFile(const std::string &path, const std::string &descr,
                 const std::vector<int64_t> &shape, std::span<const uint8_t> data);

} // namespace tilus::npy
