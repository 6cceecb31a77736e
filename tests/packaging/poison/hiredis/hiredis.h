#error "a memory-only statepact build must not include hiredis"
