package dev.spindle.model;

import java.nio.file.Path;

/**
 * Where a tensor's bytes lie in its checkpoint file, so that a device backend's upload can read them with positional reads
 * ({@link FileReads}) rather than through the mapping.
 *
 * @param file    the safetensors file
 * @param fileKey the file's identity when it was mapped and checked ({@code BasicFileAttributes.fileKey}: device and
 *                inode on Linux; null where the platform has none): a read refuses a file replaced since
 * @param offset  the byte offset of the first byte in the file
 */
public record FileRange(Path file, Object fileKey, long offset) {
    public FileRange {
        if (offset < 0) {
            throw new IllegalArgumentException(file + ": negative offset " + offset);
        }
    }

    /** The range {@code bytes} further into the file. */
    public FileRange plus(long bytes) {
        return new FileRange(file, fileKey, offset + bytes);
    }
}
