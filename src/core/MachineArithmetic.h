// What the machine a program runs on computes where LLVM IR leaves the
// result undefined: the backend says it, the pipeline makes it explicit
// before anything is folded (passes/DefinedArithmetic).
#pragma once

namespace morpheus::core {

// What the machine a program runs on computes where LLVM IR leaves the
// result undefined or poison.
struct MachineArithmetic {
  // Integers narrower than this are computed in a register of this width
  // (zero- or sign-extended, as LLVM's type legalization promotes them);
  // wider ones, up to 64 bits, in 64. eBPF with ALU32 (-mcpu=v3 and later)
  // and x86-64: 32; eBPF without ALU32: 64. Shift counts are masked to the
  // register's width: a 32-bit shift by 40 shifts by 8 with ALU32, and
  // shifts every bit out without.
  unsigned narrowRegisterBits = 64;
  // Division and remainder always have a result (eBPF: x / 0 = 0,
  // x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0), rather than trapping (x86,
  // where the original program would crash and there is nothing to keep).
  bool definedDivision = true;

  bool operator==(const MachineArithmetic &) const = default;
};

} // namespace morpheus::core
