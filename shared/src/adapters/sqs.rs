//! SQS FIFO adapter. Being written.
