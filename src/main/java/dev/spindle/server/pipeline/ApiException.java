package dev.spindle.server.pipeline;

/** A request the API refuses, with the HTTP status and the OpenAI error fields. */
public final class ApiException extends RuntimeException {
    public final int status;
    public final String param;
    /** A machine-readable reason clients act on (Anthropic's {@code error.details.error_code}), or null. */
    public final String errorCode;

    public ApiException(int status, String message, String param) {
        this(status, message, param, null);
    }

    public ApiException(int status, String message, String param, String errorCode) {
        super(message);
        this.status = status;
        this.param = param;
        this.errorCode = errorCode;
    }

    public static ApiException badRequest(String message, String param) {
        return new ApiException(400, message, param);
    }
}
