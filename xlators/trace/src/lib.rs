//! debug/trace: logs every fop with its arguments and reply
