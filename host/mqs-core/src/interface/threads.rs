//! Threads and their registers, as every source reports them.

use serde::{Deserialize, Serialize};

/// One thread of a process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub tid: i32,
    /// Its name (`comm`), where the source has it.
    pub name: Option<String>,
    /// The state letter of /proc (`S`, `R`, `t`...), live sources only.
    pub state: Option<char>,
    /// Where the source has them: a stopped live process, a core file, a
    /// snapshot that recorded them.
    pub registers: Option<Registers>,
}

/// The general registers of an x86-64 thread, in the order of the kernel's
/// `user_regs_struct` (which is also `pr_reg` of a core's NT_PRSTATUS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registers {
    pub values: [u64; Registers::COUNT],
}

impl Registers {
    /// Registers in `user_regs_struct`.
    pub const COUNT: usize = 27;
    /// Their names, in that order.
    pub const NAMES: [&'static str; Registers::COUNT] = [
        "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx",
        "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds",
        "es", "fs", "gs",
    ];
    const RBP: usize = 4;
    const RIP: usize = 16;
    const RSP: usize = 19;

    /// From the raw bytes of a `user_regs_struct` (little-endian words).
    pub fn from_le_bytes(raw: &[u8]) -> Option<Self> {
        if raw.len() < Self::COUNT * 8 {
            return None;
        }
        let mut values = [0u64; Self::COUNT];
        for (v, word) in values.iter_mut().zip(raw.chunks_exact(8)) {
            *v = u64::from_le_bytes(word.try_into().ok()?);
        }
        Some(Self { values })
    }

    /// Only the instruction and stack pointers, the rest zero: what
    /// /proc/PID/task/TID/syscall tells of a thread that another tracer
    /// holds. Frames whose CFA needs the frame pointer end the walk.
    pub fn from_ip_sp(ip: u64, sp: u64) -> Self {
        let mut values = [0u64; Self::COUNT];
        values[Self::RIP] = ip;
        values[Self::RSP] = sp;
        Self { values }
    }

    /// The instruction pointer.
    pub fn ip(&self) -> u64 {
        self.values[Self::RIP]
    }

    /// The stack pointer.
    pub fn sp(&self) -> u64 {
        self.values[Self::RSP]
    }

    /// The frame pointer.
    pub fn bp(&self) -> u64 {
        self.values[Self::RBP]
    }

    /// A register by name.
    pub fn get(&self, name: &str) -> Option<u64> {
        Self::NAMES
            .iter()
            .position(|&n| n == name)
            .map(|i| self.values[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_registers() {
        let raw: Vec<u8> = (0..27u64).flat_map(|i| (i * 0x100).to_le_bytes()).collect();
        let regs = Registers::from_le_bytes(&raw).unwrap();
        assert_eq!(regs.ip(), 16 * 0x100);
        assert_eq!(regs.sp(), 19 * 0x100);
        assert_eq!(regs.bp(), 4 * 0x100);
        assert_eq!(regs.get("gs"), Some(26 * 0x100));
        assert_eq!(Registers::from_le_bytes(&raw[..100]), None);
    }
}
