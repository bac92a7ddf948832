"""mqs's message-queue host for debuggers' Python: the C contract of
include/mpi_interface.h driven with ctypes (host.py, its types generated
into mqs_abi.py), the DLL kept in a helper process (isolate.py), the
`mpi queues` command (command.py) and mqs-dump's listing (render.py).
debuggers/gdb/mqs.py and debuggers/lldb/mqs.py plug a debugger in."""
