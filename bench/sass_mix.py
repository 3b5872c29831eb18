#!/usr/bin/env python3
"""Instruction counts of each kernel of a .cu file, without a GPU or a SASS disassembler.

Compiles the file to an sm_90 cubin with nvcc (the project's include paths, -O3) and counts the
16-byte instructions of each kernel's .text section by opcode (the low 9 bits of the first word).
The names below were identified with nvcc 13.0 by compiling kernels that each repeat one PTX
instruction (docs/cuda.md, "The 3xTF32 split"); other opcodes print as hex. A static count: a
loop body unrolled once counts once, so compare kernels of the same structure (before/after a
change), not run times.

usage: python3 bench/sass_mix.py FILE.cu [SUBSTRING...]   (kernels whose mangled name has all)
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

NAMES = {0x02: 'MOV', 0x07: 'SEL', 0x08: 'MUFU', 0x09: 'FMNMX', 0x0b: 'FSETP', 0x0c: 'ISETP',
         0x10: 'IADD3', 0x11: 'LEA', 0x12: 'LOP3', 0x19: 'SHF', 0x20: 'FMUL', 0x21: 'FADD',
         0x23: 'FFMA', 0x24: 'IMAD', 0x36: 'VIADD', 0x3c: 'HMMA', 0x118: 'NOP', 0x184: 'LDS',
         0x189: 'SHFL'}


def sections(cubin):
    """(name, offset, size) of every .text.<kernel> section, from readelf."""
    out = subprocess.run(['readelf', '-S', '-W', cubin], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        m = re.search(r'\]\s+\.text\.(\S+)\s+PROGBITS\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)', line)
        if m:
            yield m.group(1), int(m.group(2), 16), int(m.group(3), 16)


def main():
    if len(sys.argv) < 2 or not sys.argv[1].endswith('.cu'):
        sys.exit(__doc__.strip().splitlines()[-1])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, 'k.cubin')
        subprocess.run(['nvcc', '-arch=sm_90', '-O3', '-std=c++17', '-I' + root + '/include',
                        '-I' + root + '/src', '-cubin', '-o', cubin, sys.argv[1]], check=True)
        data = open(cubin, 'rb').read()
        for name, off, size in sections(cubin):
            if not all(s in name for s in sys.argv[2:]):
                continue
            count = collections.Counter()
            for i in range(off, off + size, 16):
                op = int.from_bytes(data[i:i + 8], 'little') & 0x1ff
                count[NAMES.get(op, '%03x' % op)] += 1
            demangled = subprocess.run(['c++filt', name], capture_output=True,
                                       text=True).stdout.strip()
            print('%6d  %s' % (size // 16, demangled))
            print('        ' + ' '.join('%s:%d' % kv for kv in count.most_common(12)))


if __name__ == '__main__':
    main()
