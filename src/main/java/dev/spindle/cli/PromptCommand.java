package dev.spindle.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spindle.chat.ChatTemplate;
import dev.spindle.chat.JsonValues;
import dev.spindle.tokenizer.Tokenizer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import dev.spindle.wiring.ModelFiles;

/** {@code spindle prompt}: the rendered chat prompt and its token ids, exactly as the model will see them. */
@Command(name = "prompt", mixinStandardHelpOptions = true,
        description = "Render OpenAI-style messages with the model's own chat template and tokenize the result.")
final class PromptCommand implements Callable<Integer> {
    @Option(names = "--model", required = true, paramLabel = "DIR", description = "Model directory with tokenizer.json and a chat template.")
    Path model;

    @Option(names = "--messages", required = true, paramLabel = "FILE", description = "JSON file: a list of messages, or an object with \"messages\" (and optionally \"tools\").")
    Path messages;

    @Option(names = "--tools", paramLabel = "FILE", description = "JSON file: a list of OpenAI tool definitions.")
    Path tools;

    @Option(names = "--kwargs", paramLabel = "JSON", description = "Template variables, e.g. '{\"enable_thinking\": false}'.")
    String kwargs;

    @Option(names = "--no-generation-prompt", description = "Leave out the assistant generation prompt.")
    boolean noGenerationPrompt;

    @Override
    public Integer call() throws IOException {
        ObjectMapper json = new ObjectMapper();
        JsonNode m = readJson(json, messages, "--messages");
        JsonNode toolNode = tools != null ? readJson(json, tools, "--tools") : m.get("tools");
        JsonNode list = m.isArray() ? m : m.get("messages");
        if (list == null || !list.isArray()) {
            throw new IllegalArgumentException(messages + ": expected a JSON list of messages or an object with a \"messages\" list");
        }
        Map<String, Object> vars = new LinkedHashMap<>();
        vars.put("add_generation_prompt", !noGenerationPrompt);
        if (kwargs != null) {
            JsonNode k = json.readTree(kwargs);
            if (k == null || !k.isObject()) {
                throw new IllegalArgumentException("--kwargs must be a JSON object, got: " + kwargs);
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> kv = (Map<String, Object>) JsonValues.toValue(k);
            vars.putAll(kv);
        }
        String prompt = ModelFiles.chatTemplate(model).render((List<?>) JsonValues.toValue(list),
                (List<?>) JsonValues.toValue(toolNode), vars);
        try (Tokenizer tok = ModelFiles.tokenizer(model)) {
            int[] ids = tok.encode(prompt);
            System.out.println(prompt);
            System.out.println("---- " + ids.length + " tokens");
            System.out.println(String.join(",", Arrays.stream(ids).mapToObj(Integer::toString).toList()));
        }
        return 0;
    }

    private static JsonNode readJson(ObjectMapper json, Path file, String option) {
        try {
            return json.readTree(file.toFile());
        } catch (IOException e) {
            throw new IllegalArgumentException(option + " " + file + ": not readable JSON: " + e.getMessage());
        }
    }
}
