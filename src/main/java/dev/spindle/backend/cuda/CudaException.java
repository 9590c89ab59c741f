package dev.spindle.backend.cuda;

/** A CUDA driver call that returned an error: the call and the driver's error name. */
public final class CudaException extends RuntimeException {
    public CudaException(String message) {
        super(message);
    }
}
