package dev.spindle.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** Tool definitions the bundled chat models were trained with (scripts/chatdata.py). */
final class ChatModelParityTestJson {
    static final JsonNode WEATHER_TOOLS;

    static {
        try {
            WEATHER_TOOLS = new ObjectMapper().readTree("""
                    [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
                      "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
                     {"type": "function", "function": {"name": "get_time", "description": "Current local time in a city.",
                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
                     {"type": "function", "function": {"name": "calculate", "description": "Evaluate an arithmetic expression.",
                      "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]""");
        } catch (java.io.IOException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private ChatModelParityTestJson() {
    }
}
