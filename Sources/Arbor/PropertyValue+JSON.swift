import Foundation

/// The JSON form of property values, used by the CLI and by the JSON adapter's files.
///
/// Plain JSON maps to the obvious kinds: `null`, `true`/`false`, strings, arrays, objects (maps);
/// numbers written without a fraction or exponent are `Int64`, others are doubles. Kinds JSON
/// lacks are objects with one tag member: `{"$date": "2026-01-02T03:04:05.678Z"}` (plus
/// `"$interval"`, seconds since 2001, when the date has sub-millisecond precision; the text
/// must then be the interval's, so that an edit of one alone is refused, not lost),
/// `{"$bytes": "<base64>"}`, `{"$double": "nan" | "inf" | "-inf"}`,
/// `{"$ref": {"type": T, "id": I}}`, `{"$child": {"type": T, "id": I}}`, and `{"$map": {...}}`
/// for a map whose member names start with `$`. The mapping is lossless both ways.
extension JSONValue {
    public init(propertyValue value: PropertyValue) {
        switch value {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .int(let number): self = .number(String(number))
        case .double(let number):
            if number.isNaN {
                self = .object([("$double", .string("nan"))])
            } else if number.isInfinite {
                self = .object([("$double", .string(number < 0 ? "-inf" : "inf"))])
            } else {
                var text = "\(number)"
                if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) { text += ".0" }
                self = .number(text)
            }
        case .string(let text): self = .string(text)
        case .date(let date):
            let (iso, exact) = ISODate.format(date)
            var members: [(key: String, value: JSONValue)] = [("$date", .string(iso))]
            if !exact { members.append(("$interval", JSONValue(propertyValue: .double(date.timeIntervalSinceReferenceDate)))) }
            self = .object(members)
        case .bytes(let data): self = .object([("$bytes", .string(Data(data).base64EncodedString()))])
        case .reference(let key): self = .object([("$ref", JSONValue(recordKey: key))])
        case .child(let key): self = .object([("$child", JSONValue(recordKey: key))])
        case .array(let values): self = .array(values.map(JSONValue.init(propertyValue:)))
        case .map(let values):
            let members = values.keys.sorted(by: utf8Less).map { (key: $0, value: JSONValue(propertyValue: values[$0]!)) }
            // By the first byte, as FORMAT says and a reader of bytes sees it: `hasPrefix` compares
            // characters, and "$" with a combining mark after it is another character.
            self = members.contains(where: { $0.key.utf8.first == UInt8(ascii: "$") }) ? .object([("$map", .object(members))]) : .object(members)
        }
    }

    init(recordKey key: RecordKey) {
        self = .object([("type", .string(key.type)), ("id", .string(key.id))])
    }

    /// Properties as a JSON object with members in canonical order.
    public init(properties: [String: PropertyValue]) {
        self = .object(properties.keys.sorted(by: utf8Less).map { ($0, JSONValue(propertyValue: properties[$0]!)) })
    }
}

extension PropertyValue {
    /// The property value a JSON value stands for; throws ``ArborError/Code/invalidInput`` for
    /// numbers out of range and malformed tags.
    public init(json: JSONValue) throws {
        self = try PropertyValue.fromJSON(json, depth: 0)
    }

    private static func invalid(_ why: String) -> ArborError { ArborError(.invalidInput, why) }

    private static func fromJSON(_ json: JSONValue, depth: Int) throws -> PropertyValue {
        guard depth < 64 else { throw invalid("values nested deeper than 64 levels") }
        switch json {
        case .null: return .null
        case .bool(let flag): return .bool(flag)
        case .string(let text): return .string(text)
        case .array(let elements): return .array(try elements.map { try fromJSON($0, depth: depth + 1) })
        case .number(let text):
            if text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
                guard let number = Double(text), number.isFinite else { throw invalid("number \(JSONValue.excerpt(text)) is out of the range of a double") }
                return .double(number)
            }
            guard let number = Int64(text) else {
                let shown = JSONValue.excerpt(text)
                throw invalid("integer \(shown) does not fit in 64 bits; write it with a fraction (\(shown).0) to store a double")
            }
            return .int(number)
        case .object(let members):
            // A tag starts with the byte "$" followed by a letter; a name whose "$" carries a
            // combining mark (an earlier version wrote such maps without `$map`) is no tag.
            guard var tag = members.first?.key, tag.utf8.first == UInt8(ascii: "$"), tag.hasPrefix("$") else {
                return .map(try mapMembers(members, depth: depth))
            }
            // Members have no order in JSON: a date's two may come either way round.
            if tag == "$interval", members.contains(where: { $0.key == "$date" }) { tag = "$date" }
            func only(_ allowed: Set<String>) throws {
                for member in members where !allowed.contains(member.key) {
                    throw invalid("unexpected member \(JSONValue.excerpt(member.key)) beside \(JSONValue.excerpt(tag))")
                }
            }
            switch tag {
            case "$date":
                try only(["$date", "$interval"])
                guard let text = json["$date"]?.stringValue, let date = ISODate.parse(text) else {
                    throw invalid("$date must be a date like 2026-01-02T03:04:05.678Z")
                }
                guard let interval = json["$interval"] else { return .date(date) }
                let seconds: Double
                // Read at the date's own depth: it is part of one value, not nested in it.
                switch try fromJSON(interval, depth: depth) {
                case .double(let number): seconds = number
                case .int(let number): seconds = Double(number)
                default: throw invalid("$interval must be a number")
                }
                // The interval is exact and the text is what a reader edits: an edit of the text
                // alone must not be dropped in silence.
                let precise = Date(timeIntervalSinceReferenceDate: seconds)
                let shown = ISODate.format(precise).text
                guard shown == text else {
                    throw invalid("$date \(JSONValue.excerpt(text)) and $interval (\(shown)) disagree: change both, or give $date alone")
                }
                return .date(precise)
            case "$bytes":
                try only(["$bytes"])
                guard let text = members[0].value.stringValue, let data = Data(base64Encoded: text) else { throw invalid("$bytes must be base64") }
                return .bytes(Array(data))
            case "$double":
                try only(["$double"])
                switch members[0].value.stringValue {
                case "nan": return .double(.nan)
                case "inf": return .double(.infinity)
                case "-inf": return .double(-.infinity)
                default: throw invalid("$double must be \"nan\", \"inf\" or \"-inf\"")
                }
            case "$ref":
                try only(["$ref"])
                return .reference(try recordKey(members[0].value))
            case "$child":
                try only(["$child"])
                return .child(try recordKey(members[0].value))
            case "$map":
                try only(["$map"])
                guard case .object(let inner) = members[0].value else { throw invalid("$map must be an object") }
                return .map(try mapMembers(inner, depth: depth))
            default:
                throw invalid("unknown tag \(JSONValue.excerpt(tag)); wrap maps whose names start with $ in {\"$map\": ...}")
            }
        }
    }

    private static func mapMembers(_ members: [(key: String, value: JSONValue)], depth: Int) throws -> [String: PropertyValue] {
        var result = [String: PropertyValue](minimumCapacity: members.count)
        for member in members { result[member.key] = try fromJSON(member.value, depth: depth + 1) }
        return result
    }

    static func recordKey(_ json: JSONValue) throws -> RecordKey {
        guard let type = json["type"]?.stringValue, let id = json["id"]?.stringValue else {
            throw invalid("a record key must be {\"type\": ..., \"id\": ...}")
        }
        return RecordKey(type: type, id: id)
    }

    /// Properties from a JSON object.
    public static func properties(json: JSONValue) throws -> [String: PropertyValue] {
        guard case .object(let members) = json else { throw invalid("properties must be a JSON object") }
        // A property's value is at depth 0, as the canonical bytes count it (the members of a map
        // are read one deeper than the map).
        return try mapMembers(members, depth: -1)
    }
}

/// UTC timestamps of the form `2026-01-02T03:04:05.678Z`, formatted and parsed without locale
/// or calendar state, so that the same date always gives the same text on every platform.
enum ISODate {
    /// Milliseconds from 1970 to the start of the year 10000.
    static let endOfYear9999: UInt64 = 253_402_300_800_000

    /// The text for `date` at millisecond precision, and whether parsing it gives `date` back exactly.
    static func format(_ date: Date) -> (text: String, exact: Bool) {
        let seconds = date.timeIntervalSince1970
        // Years 1 to 9999 only: the text form has four year digits.
        guard seconds.isFinite, seconds >= -62_135_596_800, seconds < 253_402_300_800 else { return ("0001-01-01T00:00:00.000Z", false) }
        let milliseconds = Int64((seconds * 1000).rounded())
        // The last half millisecond of 9999 rounds into the year 10000, which has five digits.
        guard milliseconds < Int64(endOfYear9999) else { return ("0001-01-01T00:00:00.000Z", false) }
        let text = format(milliseconds: milliseconds)
        let exact = PropertyValue.canonicalBits(Date(timeIntervalSince1970: Double(milliseconds) / 1000).timeIntervalSinceReferenceDate)
            == PropertyValue.canonicalBits(date.timeIntervalSinceReferenceDate)
        return (text, exact)
    }

    static func format(milliseconds: Int64) -> String {
        let (days, dayMilliseconds) = floorDivide(milliseconds, 86_400_000)
        let (year, month, day) = civil(fromDays: days)
        let hours = dayMilliseconds / 3_600_000
        let minutes = dayMilliseconds / 60_000 % 60
        let secs = dayMilliseconds / 1000 % 60
        let millis = dayMilliseconds % 1000
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(abs(value))
            return (value < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hours, 2)):\(pad(minutes, 2)):\(pad(secs, 2)).\(pad(millis, 3))Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` as a date at millisecond precision.
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20 || bytes.count == 24, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for index in range {
                guard (48...57).contains(bytes[index]) else { return nil }
                value = value * 10 + Int64(bytes[index] - 48)
            }
            return value
        }
        let separators: [(Int, Character)] = [(4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":")]
        guard separators.allSatisfy({ bytes[$0.0] == $0.1.asciiValue! }),
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...daysIn(month, of: year)).contains(day), hour < 24, minute < 60, second < 60
        else { return nil }
        var millis: Int64 = 0
        if bytes.count == 24 {
            guard bytes[19] == UInt8(ascii: "."), let fraction = number(20..<23) else { return nil }
            millis = fraction
        }
        let days = days(fromCivil: year, month, day)
        let total = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
        return Date(timeIntervalSince1970: Double(total) / 1000)
    }

    private static func daysIn(_ month: Int64, of year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
        return (quotient, value - quotient * divisor)
    }

    // Howard Hinnant's days-from-civil algorithms.
    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPrime = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
        let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
