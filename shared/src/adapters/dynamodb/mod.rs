//! DynamoDB adapters. Being written.
