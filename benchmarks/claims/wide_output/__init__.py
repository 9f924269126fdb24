"""An op whose output is 64 MiB: mapped fresh by the allocator on every call (see ``timing.heap_room``)."""
