package dev.spindle.server.openai;

/** A request the API refuses, with the HTTP status and the OpenAI error fields. */
public final class ApiException extends RuntimeException {
    public final int status;
    public final String param;

    public ApiException(int status, String message, String param) {
        super(message);
        this.status = status;
        this.param = param;
    }

    public static ApiException badRequest(String message, String param) {
        return new ApiException(400, message, param);
    }
}
