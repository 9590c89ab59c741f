package dev.spindle.cli;

import dev.spindle.model.Checkpoint;
import dev.spindle.model.LoadFormat;
import dev.spindle.model.PageCache;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code bench --cold-page-cache}: a start from the disk, held to the disk's speed. Before the load the checkpoint's
 * files are read once with direct I/O (the disk's read speed, the limit), then dropped from the page cache, so that the
 * load reads every byte from the disk.
 *
 * @param files      the checkpoint's safetensors files
 * @param bytes      their size in all
 * @param diskGBs    their direct read speed, GB/s
 * @param threads    the threads that read them
 * @param leftBytes  bytes still cached after the drop (at most 1% of {@code bytes})
 */
record ColdStart(List<Path> files, long bytes, double diskGBs, int threads, long leftBytes) {
    /** The most of the checkpoint that may stay cached for a start to count as one from the disk. */
    static final double MOST_LEFT = 0.01;
    /**
     * Threads that read the disk directly, each one 16 MiB read at a time: enough reads in flight for an NVMe drive (the
     * load's readahead keeps many in flight; a limit the load can beat is none).
     */
    static final int DISK_THREADS = 16;

    /** Measures the disk over {@code dir}'s checkpoint and drops its files from the page cache; refuses where that cannot be done. */
    static ColdStart prepare(Path dir, LoadFormat format) {
        if (format != LoadFormat.SAFETENSORS) {
            throw new IllegalArgumentException("--cold-page-cache reads a checkpoint from the disk: it needs --load-format safetensors");
        }
        PageCache.unsupportedReason().ifPresent(why -> {
            throw new IllegalArgumentException("--cold-page-cache: " + why);
        });
        List<Path> files = Checkpoint.files(dir);
        long bytes = 0;
        for (Path f : files) {
            try {
                bytes += Files.size(f);
            } catch (IOException e) {
                throw new UncheckedIOException(f + ": cannot be read", e);
            }
        }
        int threads = DISK_THREADS;
        files.forEach(PageCache::evict);
        double disk = PageCache.directRead(files, threads).gbPerSecond();
        files.forEach(PageCache::evict);
        long left = files.stream().mapToLong(PageCache::residentBytes).sum();
        if (left > MOST_LEFT * bytes) {
            throw new IllegalArgumentException(String.format(java.util.Locale.ROOT,
                    "--cold-page-cache: %,d of the checkpoint's %,d bytes stayed in the page cache after being dropped (another process "
                            + "maps them, or the file system keeps its files in memory, as tmpfs and /dev/shm do): a start from the disk "
                            + "cannot be measured here", left, bytes));
        }
        return new ColdStart(files, bytes, disk, threads, left);
    }

    /**
     * The figures of the start against the disk.
     *
     * @param readSeconds     from the start until the checkpoint was read (the CPU backend: its load, which reads it into
     *                        memory; a device backend: the end of its upload, which reads it as it copies it)
     * @param onDeviceSeconds from the start until the weights were on the device, or 0 where there is none (the CPU backend)
     */
    Map<String, Object> report(double readSeconds, double onDeviceSeconds) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("checkpoint_bytes", bytes);
        out.put("checkpoint_files", files.size());
        out.put("left_in_page_cache_bytes", leftBytes);
        out.put("disk_direct_read_gb_per_second", round(diskGBs));
        out.put("disk_read_threads", threads);
        double read = bytes / readSeconds / 1e9;
        out.put("load_read_gb_per_second", round(read));
        out.put("load_read_of_disk", round(read / diskGBs));
        if (onDeviceSeconds > 0) {
            double ready = bytes / onDeviceSeconds / 1e9;
            out.put("weights_on_device_gb_per_second", round(ready));
            out.put("weights_on_device_of_disk", round(ready / diskGBs));
        }
        return out;
    }

    private static double round(double v) {
        return Math.round(v * 1000) / 1000.0;
    }
}
