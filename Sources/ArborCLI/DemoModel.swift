import Arbor

/// The value types of `arbor demo`: a small project tracker, as an application would declare it.
struct DemoProject: Storable, Equatable {
    static let typeName = "Project"
    var id: String
    var name: String
    var tasks: [DemoTask]
}

struct DemoTask: Storable, Equatable {
    static let typeName = "Task"
    var id: String
    var title: String
    var done: Bool
    var notes: [DemoNote]
    var owner: Ref<DemoPerson>?
}

struct DemoNote: Storable, Equatable {
    static let typeName = "Note"
    var id: String
    var text: String
}

struct DemoPerson: Storable, Equatable {
    static let typeName = "Person"
    var id: String
    var name: String
}
