package dev.spindle.grammar;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The formats constrained decoding enforces, each as an anchored pattern (and a length bound for
 * hostname), built once and shared. Each admits a subset of what RFC 3339, RFC 5321 / 1123,
 * RFC 2673 / 4291 and RFC 4122 allow, written the common way: upper-case {@code T} and {@code Z},
 * seconds 00-59 (no leap second), real calendar dates (leap years included), dot-atom email
 * addresses with a host-name domain. Other formats (uri, regex, json-pointer, ...) are annotations:
 * read and not enforced, as JSON Schema 2020-12 makes every format by default.
 */
final class Formats {
    private static final String DAY31 = "(0[1-9]|[12][0-9]|3[01])", DAY30 = "(0[1-9]|[12][0-9]|30)", DAY28 = "(0[1-9]|1[0-9]|2[0-8])";
    private static final String LEAP_YEAR = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)";
    private static final String DATE = "([0-9]{4}-((0[13578]|1[02])-" + DAY31 + "|(0[469]|11)-" + DAY30 + "|02-" + DAY28 + ")|" + LEAP_YEAR + "-02-29)";
    private static final String TIME = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    private static final String DURATION_TIME = "T([0-9]+H([0-9]+M)?([0-9]+S)?|[0-9]+M([0-9]+S)?|[0-9]+S)";
    private static final String DURATION = "P([0-9]+Y([0-9]+M)?([0-9]+D)?(" + DURATION_TIME + ")?|[0-9]+M([0-9]+D)?(" + DURATION_TIME + ")?|[0-9]+D("
            + DURATION_TIME + ")?|" + DURATION_TIME + "|[0-9]+W)";
    private static final String LABEL = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    private static final String HOSTNAME = LABEL + "(\\." + LABEL + ")*";
    private static final String ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
    private static final String OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    private static final String IPV4 = OCTET + "(\\." + OCTET + "){3}";
    private static final String H16 = "[0-9A-Fa-f]{1,4}";
    private static final String LS32 = "(" + H16 + ":" + H16 + "|" + IPV4 + ")";
    private static final String IPV6 = "((" + H16 + ":){6}" + LS32 + "|::(" + H16 + ":){5}" + LS32 + "|(" + H16 + ")?::(" + H16 + ":){4}" + LS32
            + "|((" + H16 + ":){0,1}" + H16 + ")?::(" + H16 + ":){3}" + LS32 + "|((" + H16 + ":){0,2}" + H16 + ")?::(" + H16 + ":){2}" + LS32
            + "|((" + H16 + ":){0,3}" + H16 + ")?::" + H16 + ":" + LS32 + "|((" + H16 + ":){0,4}" + H16 + ")?::" + LS32
            + "|((" + H16 + ":){0,5}" + H16 + ")?::" + H16 + "|((" + H16 + ":){0,6}" + H16 + ")?::)";
    private static final String HEX = "[0-9A-Fa-f]";

    private static final Map<String, String> PATTERNS = Map.of(
            "date", DATE,
            "time", TIME,
            "date-time", DATE + "T" + TIME,
            "duration", DURATION,
            "email", ATEXT + "+(\\." + ATEXT + "+)*@" + HOSTNAME,
            "hostname", HOSTNAME,
            "ipv4", IPV4,
            "ipv6", IPV6,
            "uuid", HEX + "{8}-" + HEX + "{4}-" + HEX + "{4}-" + HEX + "{4}-" + HEX + "{12}");

    /** Formats read as annotations (known, not enforced). */
    static final Set<String> ANNOTATED = Set.of("uri", "uri-reference", "iri", "iri-reference", "uri-template", "json-pointer",
            "relative-json-pointer", "regex", "idn-email", "idn-hostname", "int32", "int64", "float", "double", "byte", "binary", "password");

    private static final Map<String, StringRule> RULES = new ConcurrentHashMap<>();

    /** The rule of an enforced format, or null when the format is not enforced. */
    static StringRule rule(String format) {
        String p = PATTERNS.get(format);
        if (p == null) {
            return null;
        }
        return RULES.computeIfAbsent(format, f -> new StringRule(Dfa.exact(Regex.parse(p)), 0, f.equals("hostname") ? 253 : Integer.MAX_VALUE));
    }

    static boolean enforced(String format) {
        return PATTERNS.containsKey(format);
    }
}
