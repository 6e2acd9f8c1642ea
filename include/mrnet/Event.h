// MRNet 5.0.1's events (docs/mrnet.md, decision 9), on Canopy: a tool hears of
// data, of changes of the tree and of errors by callbacks
// (Network::register_EventCallback), by a file descriptor per class
// (Network::get_EventNotificationFd) or by polling (Network::next_Event).
#pragma once

#include <string>

#include "mrnet/Types.h"

namespace MRN {

typedef int EventClass;
typedef int EventType;

class Stream;

class EventData {
 public:
  virtual ~EventData() = default;
};

class Event {
 public:
  static const EventClass EVENT_CLASS_ALL;  // 0
  static const EventClass DATA_EVENT;       // 1
  static const EventClass TOPOLOGY_EVENT;   // 2
  static const EventClass ERROR_EVENT;      // 3
  static EventType EVENT_TYPE_ALL;          // -1

  Event(EventClass event_class, EventType type, EventData* data) : class_(event_class), type_(type), data_(data) {}
  virtual ~Event() { delete data_; }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  EventClass get_Class() const { return class_; }
  EventType get_Type() const { return type_; }
  EventData* get_Data() const { return data_; }

 protected:
  EventClass class_;
  EventType type_;
  EventData* data_;
};

class DataEvent : public Event {
 public:
  static EventType DATA_AVAILABLE;  // 0
  static EventType min_Type() { return DATA_AVAILABLE; }
  static EventType max_Type() { return DATA_AVAILABLE; }
  class DataEventData : public EventData {
   public:
    explicit DataEventData(Stream* stream) : stream_(stream) {}
    Stream* get_Stream() { return stream_; }

   private:
    Stream* stream_;
  };
  DataEvent(EventType type, DataEventData* data) : Event(DATA_EVENT, type, data) {}
};

class ErrorEvent : public Event {
 public:
  static EventType ERROR_INTERNAL;  // 0
  static EventType ERROR_SYSTEM;    // 1
  static EventType ERROR_USAGE;     // 2
  static EventType min_Type() { return ERROR_INTERNAL; }
  static EventType max_Type() { return ERROR_USAGE; }
  class ErrorEventData : public EventData {
   public:
    ErrorEventData(Rank rank, const std::string& message) : rank_(rank), message_(message) {}
    Rank get_Rank() const { return rank_; }
    std::string get_Message() const { return message_; }

   private:
    Rank rank_;
    std::string message_;
  };
  ErrorEvent(EventType type, ErrorEventData* data) : Event(ERROR_EVENT, type, data) {}
};

class TopologyEvent : public Event {
 public:
  static EventType TOPOL_ADD_BE;         // 0: a back-end joined
  static EventType TOPOL_ADD_CP;         // 1: a commnode joined (Canopy adds none later)
  static EventType TOPOL_REMOVE_NODE;    // 2: a process failed
  static EventType TOPOL_CHANGE_PARENT;  // 3: an orphan was adopted
  static EventType min_Type() { return TOPOL_ADD_BE; }
  static EventType max_Type() { return TOPOL_CHANGE_PARENT; }
  class TopolEventData : public EventData {
   public:
    TopolEventData(Rank rank, Rank parent) : rank_(rank), parent_(parent) {}
    Rank get_Rank() const { return rank_; }
    Rank get_Parent_Rank() const { return parent_; }

   private:
    Rank rank_;
    Rank parent_;
  };
  TopologyEvent(EventType type, TopolEventData* data) : Event(TOPOLOGY_EVENT, type, data) {}
};

typedef void (*evt_cb_func)(Event*, void*);

}  // namespace MRN
