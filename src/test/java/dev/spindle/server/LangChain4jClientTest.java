package dev.spindle.server;

import dev.langchain4j.model.chat.ChatModel;
import dev.langchain4j.model.chat.StreamingChatModel;
import dev.langchain4j.model.chat.response.ChatResponse;
import dev.langchain4j.model.chat.response.StreamingChatResponseHandler;
import dev.langchain4j.model.openai.OpenAiChatModel;
import dev.langchain4j.model.openai.OpenAiStreamingChatModel;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** LangChain4j's OpenAI module against the real server: a plain and a streamed answer. */
@QuarkusTest
class LangChain4jClientTest {
    @TestHTTPResource("/v1")
    URL v1;

    @org.junit.jupiter.api.BeforeEach
    void modelLoaded() {
        ServerReady.await(v1);
    }

    @Test
    void plainAndStreamingChat() throws Exception {
        ChatModel model = OpenAiChatModel.builder().baseUrl(v1.toString()).apiKey("unused").modelName("spindle-chat-target")
                .temperature(0.0).build();
        String answer = model.chat("What is 58 + 27?");
        System.out.println("[langchain4j] " + answer);
        assertTrue(answer.contains("85"), answer);

        StreamingChatModel streaming = OpenAiStreamingChatModel.builder().baseUrl(v1.toString()).apiKey("unused")
                .modelName("spindle-chat-target").temperature(0.0).build();
        StringBuilder parts = new StringBuilder();
        CompletableFuture<ChatResponse> done = new CompletableFuture<>();
        streaming.chat("What is 12 + 30?", new StreamingChatResponseHandler() {
            @Override
            public void onPartialResponse(String partial) {
                parts.append(partial);
            }

            @Override
            public void onCompleteResponse(ChatResponse response) {
                done.complete(response);
            }

            @Override
            public void onError(Throwable error) {
                done.completeExceptionally(error);
            }
        });
        ChatResponse r = done.get(120, TimeUnit.SECONDS);
        assertTrue(parts.toString().contains("42"), parts.toString());
        assertTrue(r.aiMessage().text().contains("42"), r.aiMessage().text());
    }
}
