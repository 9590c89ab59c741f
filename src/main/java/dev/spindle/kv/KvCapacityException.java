package dev.spindle.kv;

/** The KV pool has no free block for a request. */
public final class KvCapacityException extends RuntimeException {
    public KvCapacityException(String message) {
        super(message);
    }
}
