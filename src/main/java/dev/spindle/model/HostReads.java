package dev.spindle.model;

/**
 * When a checkpoint's mapped bf16 tensors are read from the disk or the page cache into memory.
 */
public enum HostReads {
    /**
     * As the model is bound, by several threads at once: the CPU backend computes from the mapping, and its first
     * forward pass should not fault the pages in one by one.
     */
    AT_LOAD,
    /**
     * By whoever copies them next: a device backend's upload reads each part as it copies it, so that from a cold
     * page cache the reading and the copying to the device overlap instead of adding up.
     */
    AT_UPLOAD
}
