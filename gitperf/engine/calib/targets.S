# One empty function per entry-instruction class (see gitperf/elf.py classify()).
        .text
        .globl f_push, f_nop, f_nop5, f_branch, f_endbr, f_singlestep
        .type f_push, @function
f_push:                         # emulated by the kernel
        push %rbp
        pop %rbp
        ret
        .size f_push, .-f_push
        .type f_nop, @function
f_nop:                          # emulated
        nop
        ret
        .size f_nop, .-f_nop
        .type f_nop5, @function
f_nop5:                         # the 5-byte NOP of -pg -mfentry -mnop-mcount: optimized into a call
        .byte 0x0f, 0x1f, 0x44, 0x00, 0x00      # to a trampoline by kernels >= 6.18, else emulated
        ret
        .size f_nop5, .-f_nop5
        .type f_branch, @function
f_branch:                       # emulated (jmp)
        jmp 1f
1:      ret
        .size f_branch, .-f_branch
        .type f_endbr, @function
f_endbr:                        # single-stepped on most kernels
        endbr64
        ret
        .size f_endbr, .-f_endbr
        .type f_singlestep, @function
f_singlestep:                   # mov: single-stepped out of line
        mov %rdi, %rax
        ret
        .size f_singlestep, .-f_singlestep
        .section .note.GNU-stack,"",@progbits
