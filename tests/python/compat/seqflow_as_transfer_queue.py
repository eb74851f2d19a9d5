"""pytest plugin (-p seqflow_as_transfer_queue): `import transfer_queue` gives
seqflow from here on. A -p plugin loads before any test file is collected,
so TransferQueue's own test files run against seqflow unmodified."""

import seqflow.compat

seqflow.compat.install_as_transfer_queue()
